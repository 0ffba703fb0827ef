package postgresstore_test

import (
	"context"
	"testing"

	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestSweep runs storetest's sweep suite, each case on a table of its own.
func TestSweep(t *testing.T) {
	t.Parallel()
	storetest.RunSweep(t, func(t *testing.T, o storetest.SweepOptions) storetest.SweepRig {
		s, pool := newStore(t, int32(o.MaxConns),
			postgresstore.WithSweepInterval(o.Interval),
			postgresstore.WithSweepBatch(o.Batch),
			postgresstore.WithSweepReport(o.Report))
		table := tableOf(t, s)
		return storetest.SweepRig{
			Store: s,
			Rows: func(t *testing.T) int {
				t.Helper()
				var n int
				if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
			Sweeper: func(t *testing.T, batch int) storetest.SweepStore {
				sweeper := postgresstore.New(pgtest.Pool(t, 2), postgresstore.WithTable(table), postgresstore.WithSweepInterval(0), postgresstore.WithSweepBatch(batch))
				t.Cleanup(func() { _ = sweeper.Close() })
				return sweeper
			},
			Hold: func(t *testing.T, key string) func() {
				holder, err := pool.Begin(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if _, err := holder.Exec(t.Context(), "UPDATE "+table+" SET data = 'held' WHERE key = $1", []byte(key)); err != nil {
					_ = holder.Rollback(t.Context())
					t.Fatal(err)
				}
				return func() { _ = holder.Rollback(context.WithoutCancel(t.Context())) }
			},
		}
	})
}
