package idempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestStreamCoreOverStores runs the core stream cases (once across two
// Server values, replay byte for byte, resume after N, a caller leaving
// mid-stream) over Redis, PostgreSQL and MySQL.
func TestStreamCoreOverStores(t *testing.T) {
	t.Parallel()
	for name, newStore := range map[string]func(t *testing.T) store.Store{
		"redis": func(t *testing.T) store.Store { return redisstore.New(redistest.StartServer(t).Client()) },
		"postgres": func(t *testing.T) store.Store {
			l := newPGLedger(t)
			s := postgresstore.New(l.admin, postgresstore.WithTable(l.records()), postgresstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"mysql": mysqlStore,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			streamtest.RunCore(t, newStore)
		})
	}
}
