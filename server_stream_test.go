package idempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/streamtest"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestStreamCore runs the core stream cases over the memory store; the
// integration module runs them over Redis and PostgreSQL.
func TestStreamCore(t *testing.T) {
	t.Parallel()
	streamtest.RunCore(t, func(t *testing.T) store.Store { return memStore(t) })
}
