package idempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/behaviourtest"
	"github.com/grpc-idempotency/idempotency/internal/test/connecttest"
	"github.com/grpc-idempotency/idempotency/internal/test/redistest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// TestConnectBehaviour runs the table of docs/semantics/README.md against the
// connect-go handler interceptor (connectidempotency) over the Connect,
// gRPC and gRPC-Web protocols, on Redis, PostgreSQL and SQLite, as
// connectidempotency's TestBehaviour does on the memory store.
func TestConnectBehaviour(t *testing.T) {
	t.Parallel()
	eps := behaviourtest.WithEntryPoints(connecttest.EntryPoints(connectidempotency.NewInterceptor)...)
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		s := redisstore.New(redistest.StartServer(t).Client())
		behaviourtest.Run(t, func(*testing.T) store.Store { return s }, eps)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		l := newPGLedger(t)
		s := postgresstore.New(l.admin, postgresstore.WithTable(l.records()), postgresstore.WithSweepInterval(0))
		t.Cleanup(func() { _ = s.Close() })
		behaviourtest.Run(t, func(*testing.T) store.Store { return s }, eps)
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s, _, _ := newSQLiteStore(t)
		behaviourtest.Run(t, func(*testing.T) store.Store { return s }, eps)
	})
}
