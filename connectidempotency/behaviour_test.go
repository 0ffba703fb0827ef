package connectidempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest"
	"github.com/grpc-idempotency/idempotency/internal/test/behaviourtest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// TestBehaviour runs the table of docs/semantics/README.md against the handler
// interceptor, over real connect-go servers of the Connect, gRPC and
// gRPC-Web protocols, on the memory store; the integration module runs it
// on Redis and PostgreSQL.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	behaviourtest.Run(t, func(t *testing.T) store.Store {
		mem := memorystore.New()
		t.Cleanup(func() { _ = mem.Close() })
		return mem
	}, behaviourtest.WithEntryPoints(connecttest.EntryPoints(connectidempotency.NewInterceptor)...))
}
