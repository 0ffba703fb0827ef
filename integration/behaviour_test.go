package idempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/test/behaviourtest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestBehaviour runs the table of docs/semantics/README.md against every
// entry point on Redis, PostgreSQL, MySQL (MariaDB) and SQLite, as the
// root package's TestBehaviour does on the memory store. Each backend is
// one server (for SQLite, one database file) shared by the suite's
// subtests, which use keys of their own.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		s := redisstore.New(redistest.StartServer(t).Client())
		behaviourtest.Run(t, func(*testing.T) store.Store { return s })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		l := newPGLedger(t)
		s := postgresstore.New(l.admin, postgresstore.WithTable(l.records()), postgresstore.WithSweepInterval(0))
		t.Cleanup(func() { _ = s.Close() })
		behaviourtest.Run(t, func(*testing.T) store.Store { return s })
	})
	t.Run("mysql", func(t *testing.T) {
		t.Parallel()
		s := newMyLedger(t).store(t, 16)
		behaviourtest.Run(t, func(*testing.T) store.Store { return s })
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s, _, _ := newSQLiteStore(t)
		behaviourtest.Run(t, func(*testing.T) store.Store { return s })
	})
}
