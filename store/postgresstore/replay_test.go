package postgresstore_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
)

// completed claims and completes key with data, kept an hour.
func completed(t *testing.T, s *postgresstore.Store, key string, data []byte) {
	t.Helper()
	c, err := s.Claim(t.Context(), key, []byte("fp"), time.Hour, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("claim %q: won=%v err=%v", key, c.Won(), err)
	}
	if err := s.Complete(t.Context(), key, c.Token, data, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// wantReplay checks that c is the completed entry with data.
func wantReplay(t *testing.T, c store.ClaimResult, err error, data []byte) {
	t.Helper()
	if err != nil || c.Won() || c.Existing.State != store.StateCompleted || !bytes.Equal(c.Existing.Data, data) {
		t.Fatalf("replay: %+v, %v; want the completed entry %q", c, err, data)
	}
}

// rowVersion returns the system columns of key's row: a write to the row
// changes xmin (and ctid), a row lock sets xmax.
func rowVersion(t *testing.T, pool *pgxpool.Pool, table, key string) string {
	t.Helper()
	var v string
	err := pool.QueryRow(t.Context(), "SELECT xmin::text || '/' || xmax::text || '/' || ctid::text FROM "+table+" WHERE key = $1", []byte(key)).Scan(&v)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestClaimReplayWritesNothing: a claim that finds a completed key leaves its
// row as it was (no new row version, no row lock), and, run inside a
// transaction, is assigned no transaction id, so its commit writes no WAL
// record and waits for no flush.
func TestClaimReplayWritesNothing(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, 2, postgresstore.WithSweepInterval(0))
	table := tableOf(t, s)
	completed(t, s, "k", []byte("outcome"))
	before := rowVersion(t, pool, table, "k")
	for range 10 {
		c, err := s.Claim(t.Context(), "k", []byte("fp"), time.Hour, store.ClaimOptions{})
		wantReplay(t, c, err, []byte("outcome"))
	}
	if after := rowVersion(t, pool, table, "k"); after != before {
		t.Fatalf("row version (xmin/xmax/ctid) %s after 10 replays, was %s: a replay wrote or locked the row", after, before)
	}

	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
	var (
		won  bool
		st   int16
		fp   []byte
		data []byte
		xid  *int64
	)
	sql, args := postgresstore.ClaimSQL(s, "k", "token", "fp", time.Hour)
	err = tx.QueryRow(t.Context(), sql, args...).Scan(&won, &st, &fp, &data, nil, nil, nil)
	if err != nil || won || st != 2 || string(data) != "outcome" {
		t.Fatalf("claim statement: won=%v state=%d data=%q err=%v", won, st, data, err)
	}
	if err := tx.QueryRow(t.Context(), "SELECT txid_current_if_assigned()").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if xid != nil {
		t.Fatalf("a replay's statement was assigned transaction id %d: it wrote, and its commit flushes WAL", *xid)
	}
}

// TestClaimReplayNotBlockedByRowLock: a replay answers while another
// transaction holds the completed row (SELECT … FOR UPDATE), instead of
// queueing on its lock.
func TestClaimReplayNotBlockedByRowLock(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, 2, postgresstore.WithSweepInterval(0))
	completed(t, s, "k", []byte("outcome"))
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM "+tableOf(t, s)+" WHERE key = $1 FOR UPDATE", []byte("k")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := s.Claim(ctx, "k", []byte("fp"), time.Hour, store.ClaimOptions{})
	wantReplay(t, c, err, []byte("outcome"))
}

// TestClaimSeesCompletionAfterItsSnapshot: a completion that commits after
// the claim's statement began (the claim read the row in flight, then
// waited for the completing transaction's row lock) is returned as
// completed; a rollback leaves the claim in flight. The read-only path
// misses such a row, and the INSERT … ON CONFLICT returns it.
func TestClaimSeesCompletionAfterItsSnapshot(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		name := map[bool]string{true: "commit", false: "rollback"}[commit]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, pool := newStore(t, 3, postgresstore.WithSweepInterval(0))
			table := tableOf(t, s)
			first, err := s.Claim(t.Context(), "k", []byte("fp"), time.Hour, store.ClaimOptions{})
			if err != nil || !first.Won() {
				t.Fatalf("claim: won=%v err=%v", first.Won(), err)
			}
			tx, err := pool.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
			if _, err := tx.Exec(t.Context(), "UPDATE "+table+" SET state = 2, data = 'outcome' WHERE key = $1", []byte("k")); err != nil {
				t.Fatal(err)
			}
			type result struct {
				c   store.ClaimResult
				err error
			}
			done := make(chan result, 1)
			go func() {
				c, err := s.Claim(t.Context(), "k", []byte("fp"), time.Hour, store.ClaimOptions{})
				done <- result{c, err}
			}()
			waitForLockWaiter(t, pool, tx)
			if commit {
				err = tx.Commit(t.Context())
			} else {
				err = tx.Rollback(t.Context())
			}
			if err != nil {
				t.Fatal(err)
			}
			r := <-done
			if commit {
				wantReplay(t, r.c, r.err, []byte("outcome"))
			} else if r.err != nil || r.c.Won() || r.c.Existing.State != store.StateInFlight {
				t.Fatalf("claim after the rollback: %+v, %v; want the claim in flight", r.c, r.err)
			}
		})
	}
}

// waitForLockWaiter returns once a backend waits for a lock that tx's
// backend holds, failing t after 10 seconds.
func waitForLockWaiter(t *testing.T, pool *pgxpool.Pool, tx pgx.Tx) {
	t.Helper()
	pid := tx.Conn().PgConn().PID()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		var waiting bool
		err := pool.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))", int(pid)).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("no claim waited for the completing transaction's row lock")
		}
	}
}
