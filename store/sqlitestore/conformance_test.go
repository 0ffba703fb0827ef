package sqlitestore_test

import (
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestConformance runs the shared suite, every group, each case on a
// fresh database file, with the sweeper deleting expired rows every 50ms
// while the cases run: on the default table, on a table in an attached
// database, and with the store's in-process write gate off (every writer
// then waits for the write lock in SQLite's busy handler).
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []sqlitestore.Option
	}{
		{"default table", nil},
		{"named table", []sqlitestore.Option{sqlitestore.WithTable(`Records "of" keys`)}},
		{"ungated", []sqlitestore.Option{sqlitestore.Ungated()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) store.Store {
				s, _ := newStore(t, append([]sqlitestore.Option{sqlitestore.WithSweepInterval(50 * time.Millisecond), sqlitestore.WithInvalidationInterval(20 * time.Millisecond)}, tc.opts...)...)
				return s
			})
		})
	}
}
