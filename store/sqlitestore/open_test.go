package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// TestOpenPragmas: every connection of a pool from Open runs in WAL mode
// with the busy timeout and the synchronous setting asked for, and its
// transactions take the write lock when they begin.
func TestOpenPragmas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []sqlitestore.OpenOption
		sync int64 // PRAGMA synchronous: 1 NORMAL, 2 FULL
		busy int64 // ms
	}{
		{"defaults", nil, 2, 5000},
		{"normal", []sqlitestore.OpenOption{sqlitestore.WithSynchronous(sqlitestore.SynchronousNormal), sqlitestore.WithBusyTimeout(1500 * time.Millisecond)}, 1, 1500},
		{"full", []sqlitestore.OpenOption{sqlitestore.WithSynchronous(sqlitestore.SynchronousFull)}, 2, 5000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "a ?#% dir")
			db, err := sqlitestore.Open(dir+".db", append(tc.opts, sqlitestore.WithMaxConns(2))...)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// Two connections at once, so that both are set up.
			c1, err := db.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer c1.Close()
			c2, err := db.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			for i, c := range []interface {
				QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
			}{c1, c2} {
				var (
					mode       string
					sync, busy int64
					file       string
				)
				err := c.QueryRowContext(t.Context(), "SELECT (SELECT journal_mode FROM pragma_journal_mode), (SELECT synchronous FROM pragma_synchronous), (SELECT timeout FROM pragma_busy_timeout), (SELECT file FROM pragma_database_list WHERE name = 'main')").Scan(&mode, &sync, &busy, &file)
				if err != nil {
					t.Fatal(err)
				}
				if mode != "wal" || sync != tc.sync || busy != tc.busy || file != dir+".db" {
					t.Fatalf("connection %d: journal_mode %s, synchronous %d, busy_timeout %d, file %q; want wal, %d, %d, %q", i, mode, sync, busy, file, tc.sync, tc.busy, dir+".db")
				}
			}
		})
	}
}

// TestOpenTxBeginsImmediate: a transaction of a pool from Open holds the
// write lock from its BEGIN: another connection's write waits for it (and
// fails after the busy timeout), though the transaction has written
// nothing. A read-only transaction that has read holds nothing back.
func TestOpenTxBeginsImmediate(t *testing.T) {
	t.Parallel()
	db, _ := openDB(t, sqlitestore.WithBusyTimeout(100*time.Millisecond))
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE t (x)"); err != nil {
		t.Fatal(err)
	}
	ro, err := db.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ro.Rollback() }()
	if err := ro.QueryRowContext(t.Context(), "SELECT count(*) FROM t").Scan(new(int)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "INSERT INTO t VALUES (0)"); err != nil {
		t.Fatalf("a write beside an open read-only transaction: %v", err)
	}
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	_, err = db.ExecContext(t.Context(), "INSERT INTO t VALUES (1)")
	if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") && !strings.Contains(err.Error(), "locked") {
		t.Fatalf("a write beside an open transaction: %v, want SQLITE_BUSY", err)
	}
}

// TestOpenRefuses: Open refuses a synchronous setting other than NORMAL
// or FULL, and a name that is not a file's path.
func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.db")
	for _, tc := range []struct {
		path string
		opts []sqlitestore.OpenOption
	}{
		{path, []sqlitestore.OpenOption{sqlitestore.WithSynchronous("OFF")}},
		{"", nil},
		{":memory:", nil},
		{"file:x.db", nil},
	} {
		if db, err := sqlitestore.Open(tc.path, tc.opts...); err == nil {
			_ = db.Close()
			t.Errorf("Open(%q, %d options) succeeded", tc.path, len(tc.opts))
		}
	}
}

// TestOpenManyAtOnce: eight pools open one new file at once, as processes
// starting together do, and each migrates and claims: the switch of the
// file to WAL, which SQLite may refuse with SQLITE_BUSY at once to
// connections that race for it, is tried again, and no Open fails.
func TestOpenManyAtOnce(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "new.db")
		start := make(chan struct{})
		errs := make(chan error, 8)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				<-start
				db, err := sqlitestore.Open(path)
				if err != nil {
					errs <- err
					return
				}
				defer db.Close()
				s := sqlitestore.New(db, sqlitestore.WithSweepInterval(0))
				defer s.Close()
				if err := s.Migrate(t.Context()); err != nil {
					errs <- err
					return
				}
				if _, err := s.Claim(t.Context(), "k"+strconv.Itoa(i), []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil {
					errs <- err
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
