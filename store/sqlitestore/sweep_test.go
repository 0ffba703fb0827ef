package sqlitestore_test

import (
	"database/sql"
	"testing"

	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestSweep runs storetest's sweep suite, each case on a database file of
// its own; the other servers' sweepers are stores on pools of their own
// on the same file, as other processes' would be.
//
// SQLite has no row locks: a transaction that has written holds the
// database's write lock until it ends, and every sweep waits for it (as
// every write does; see Store.CompleteTx). What a sweep must not wait for
// is a reader, and Hold is one here: a transaction that has read the
// row and keeps its snapshot open, as a handler's read transaction does.
func TestSweep(t *testing.T) {
	t.Parallel()
	storetest.RunSweep(t, func(t *testing.T, o storetest.SweepOptions) storetest.SweepRig {
		db, path := openDB(t, sqlitestore.WithMaxConns(o.MaxConns))
		s := newStoreOn(t, db,
			sqlitestore.WithSweepInterval(o.Interval),
			sqlitestore.WithSweepBatch(o.Batch),
			sqlitestore.WithSweepReport(o.Report))
		return storetest.SweepRig{
			Store: s,
			Rows: func(t *testing.T) int {
				t.Helper()
				var n int
				if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+sqlitestore.DefaultTable).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
			Sweeper: func(t *testing.T, batch int) storetest.SweepStore {
				other, err := sqlitestore.Open(path, sqlitestore.WithMaxConns(2))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = other.Close() })
				sweeper := sqlitestore.New(other, sqlitestore.WithSweepInterval(0), sqlitestore.WithSweepBatch(batch))
				t.Cleanup(func() { _ = sweeper.Close() })
				return sweeper
			},
			Hold: func(t *testing.T, key string) func() {
				// Read-only: it begins DEFERRED, where the pool's other
				// transactions begin IMMEDIATE.
				tx, err := db.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := tx.QueryRowContext(t.Context(), "SELECT length(data) FROM "+sqlitestore.DefaultTable+" WHERE key = ?", []byte(key)).Scan(new(int)); err != nil {
					_ = tx.Rollback()
					t.Fatal(err)
				}
				return func() { _ = tx.Rollback() }
			},
		}
	})
}
