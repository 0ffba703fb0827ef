package idempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/test/behaviourtest"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestBehaviour runs the table of docs/semantics/README.md against every entry point
// on the memory store; the integration module runs it on Redis and
// PostgreSQL.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	behaviourtest.Run(t, func(t *testing.T) store.Store {
		mem := memStore(t)
		return mem
	})
}
