package postgresstore_test

import (
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/pgtest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestConformance runs the shared suite on one store, with its sweeper
// deleting expired rows every 50ms while the cases run: on the default
// table in the search_path, and on a schema-qualified table of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		table bool
	}{
		{"default table", false},
		{"schema-qualified table", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := pgtest.Pool(t, 8)
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
