package mysqlstore_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestSweep runs storetest's sweep suite, each case on a table of its own.
func TestSweep(t *testing.T) {
	t.Parallel()
	storetest.RunSweep(t, func(t *testing.T, o storetest.SweepOptions) storetest.SweepRig {
		s, db := newStore(t, o.MaxConns,
			mysqlstore.WithSweepInterval(o.Interval),
			mysqlstore.WithSweepBatch(o.Batch),
			mysqlstore.WithSweepReport(o.Report))
		table := tableOf(t, s)
		return storetest.SweepRig{
			Store: s,
			Rows: func(t *testing.T) int {
				t.Helper()
				var n int
				if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+table).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
			Sweeper: func(t *testing.T, batch int) storetest.SweepStore {
				sweeper := mysqlstore.New(mysqltest.DB(t, 2), mysqlstore.WithTable(table), mysqlstore.WithSweepInterval(0), mysqlstore.WithSweepBatch(batch))
				t.Cleanup(func() { _ = sweeper.Close() })
				return sweeper
			},
			Hold: func(t *testing.T, key string) func() {
				holder, err := db.BeginTx(t.Context(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := holder.ExecContext(t.Context(), "UPDATE "+table+" SET data = 'held' WHERE `key` = ?", key); err != nil {
					_ = holder.Rollback()
					t.Fatal(err)
				}
				return func() { _ = holder.Rollback() }
			},
		}
	})
}
