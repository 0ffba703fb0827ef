package postgresstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/grpc-idempotency/idempotency/internal/pgtest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestConformance runs the shared suite on one store, with its sweeper
// deleting expired rows every 50ms while the cases run: on the default
// table in the search_path, on a schema-qualified table of its own, and in
// the pgx query exec modes that use no prepared statement (for PgBouncer).
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		table bool
		mode  pgx.QueryExecMode
	}{
		{"default table", false, pgx.QueryExecModeCacheStatement},
		{"schema-qualified table", true, pgx.QueryExecModeCacheStatement},
		// What PgBouncer before 1.21 needs: no prepared statements.
		{"exec mode", true, pgx.QueryExecModeExec},
		{"simple protocol", true, pgx.QueryExecModeSimpleProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := pgtest.Config(t, 8)
			cfg.ConnConfig.DefaultQueryExecMode = tc.mode
			pool := pgtest.PoolFrom(t, cfg)
			opts := []postgresstore.Option{postgresstore.WithSweepInterval(50 * time.Millisecond)}
			if tc.table {
				opts = append(opts, postgresstore.WithTable(newSchema(t, pool)+".Records"))
			}
			s := postgresstore.New(pool, opts...)
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			storetest.Run(t, func(t *testing.T) store.Store { return s })
		})
	}
}
