package mysqlstore_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// handlerWrites returns the session's counters of rows written, updated
// and deleted (Handler_write, Handler_update, Handler_delete) and of
// INSERT, UPDATE and DELETE statements, on db's one connection.
func handlerWrites(t *testing.T, db *sql.DB) map[string]int64 {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SHOW SESSION STATUS WHERE Variable_name IN "+
		"('Handler_write', 'Handler_update', 'Handler_delete', 'Com_insert', 'Com_update', 'Com_delete')")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var (
			name string
			v    int64
		)
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		m[name] = v
	}
	if err := rows.Err(); err != nil || len(m) != 6 {
		t.Fatalf("session status %v: %v", m, err)
	}
	return m
}

// TestClaimReplayWritesNothing: ten replays of a completed key and ten
// claims of a key in flight, on a pool of one connection, leave that
// session's counters of rows written, updated and deleted, and of INSERT,
// UPDATE and DELETE statements, where they were: a replay and an in-flight
// duplicate are reads.
func TestClaimReplayWritesNothing(t *testing.T) {
	t.Parallel()
	s, db := newStore(t, 1)
	ctx := t.Context()
	done, err := s.Claim(ctx, "done", []byte("fp"), time.Minute, store.ClaimOptions{})
	if err != nil || !done.Won() {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "done", done.Token, []byte("answer"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, "busy", []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatal(err)
	}
	before := handlerWrites(t, db)
	for range 10 {
		for key, want := range map[string]store.State{"done": store.StateCompleted, "busy": store.StateInFlight} {
			c, err := s.Claim(ctx, key, []byte("fp"), time.Minute, store.ClaimOptions{})
			if err != nil || c.Won() || c.Existing.State != want {
				t.Fatalf("claim of %s: won=%v %v %v", key, c.Won(), c.Existing.State, err)
			}
		}
	}
	after := handlerWrites(t, db)
	for name, v := range before {
		if after[name] != v {
			t.Errorf("%s went from %d to %d over 20 claims of live keys, want unchanged", name, v, after[name])
		}
	}
	// The counters do count this session's writes.
	if _, err := s.Claim(ctx, "new", []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil {
		t.Fatal(err)
	}
	if w := handlerWrites(t, db); w["Handler_write"] <= after["Handler_write"] || w["Com_insert"] <= after["Com_insert"] {
		t.Fatalf("a claim of a new key left Handler_write at %d and Com_insert at %d", w["Handler_write"], w["Com_insert"])
	}
}

// TestClaimReplayNotBlockedByRowLock: while another transaction holds the
// key's row exclusively (SELECT … FOR UPDATE), a replay of the completed
// key and a claim of a key in flight answer at once, on connections of
// every isolation level; a locking read of the same row, the check that
// the lock is really held, waits and times out.
func TestClaimReplayNotBlockedByRowLock(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"'READ-UNCOMMITTED'", "'READ-COMMITTED'", "'REPEATABLE-READ'", "'SERIALIZABLE'"} {
		t.Run(strings.Trim(level, "'"), func(t *testing.T) {
			t.Parallel()
			cfg := mysqltest.Config(t)
			cfg.Params = map[string]string{"tx_isolation": level, "innodb_lock_wait_timeout": "1"}
			s, db := newStoreFrom(t, cfg, 4)
			ctx := t.Context()
			done, err := s.Claim(ctx, "done", []byte("fp"), time.Minute, store.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Complete(ctx, "done", done.Token, []byte("answer"), time.Hour); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Claim(ctx, "busy", []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil {
				t.Fatal(err)
			}
			holder, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = holder.Rollback() }()
			table := tableOf(t, s)
			if _, err := holder.ExecContext(ctx, "SELECT * FROM "+table+" WHERE `key` IN ('done', 'busy') FOR UPDATE"); err != nil {
				t.Fatal(err)
			}
			for key, want := range map[string]store.State{"done": store.StateCompleted, "busy": store.StateInFlight} {
				cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				c, err := s.Claim(cctx, key, []byte("fp"), time.Minute, store.ClaimOptions{})
				cancel()
				if err != nil || c.Won() || c.Existing.State != want {
					t.Fatalf("claim of %s while its row is locked: won=%v %v %v; want %v at once", key, c.Won(), c.Existing.State, err, want)
				}
			}
			start := time.Now()
			_, err = db.ExecContext(ctx, "SELECT * FROM "+table+" WHERE `key` = 'done' LOCK IN SHARE MODE")
			if err == nil || time.Since(start) < 900*time.Millisecond {
				t.Fatalf("a locking read of the held row: %v after %v, want a lock wait timeout", err, time.Since(start))
			}
		})
	}
}
