package migratestore_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/redistest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// The adapter keeps the whole store contract: two memory stores, and a
// move from the memory store to Redis.
func TestConformance(t *testing.T) {
	t.Parallel()
	cases := map[string]func(t *testing.T) (from, to store.Store){
		"memory to memory": func(t *testing.T) (store.Store, store.Store) {
			return newMemory(t), newMemory(t)
		},
		"memory to redis": func(t *testing.T) (store.Store, store.Store) {
			return newMemory(t), redisstore.New(redistest.StartServer(t).Client())
		},
	}
	for name, stores := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			from, to := stores(t)
			storetest.Run(t, func(*testing.T) store.Store { return migratestore.New(from, to) })
		})
	}
}

func newMemory(t *testing.T) *memorystore.Store {
	s := memorystore.New()
	t.Cleanup(func() { _ = s.Close() })
	return s
}
