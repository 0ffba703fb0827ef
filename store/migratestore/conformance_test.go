package migratestore_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// The adapter keeps the whole store contract over two memory stores (the
// integration module runs it from a memory store to Redis).
func TestConformance(t *testing.T) {
	t.Parallel()
	from, to := newMemory(t), newMemory(t)
	storetest.Run(t, func(*testing.T) store.Store { return migratestore.New(from, to) })
}

func newMemory(t *testing.T) *memorystore.Store {
	s := memorystore.New()
	t.Cleanup(func() { _ = s.Close() })
	return s
}
