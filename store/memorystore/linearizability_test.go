package memorystore_test

import (
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestLinearizability checks a history of concurrent calls on one store
// against the model of the store contract, with a sweeper racing every
// call. A memory store has no network to fault.
func TestLinearizability(t *testing.T) {
	t.Parallel()
	s := newStore(t, memorystore.WithSweepInterval(time.Millisecond))
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{Stores: []store.Store{s}, Clients: 16})
}
