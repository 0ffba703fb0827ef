package migratestore_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestLinearizability checks a history of concurrent calls on the
// adapter mid-move, two instances over one old and one new memory store,
// against the model of the store contract. The adapter's Info.Token is a
// fence made per call (its Lookup and Purge say so): Fences; its tokens own nothing on
// another instance: TokensPerInstance. Its Purge looks at the two stores
// in turn, and a claim between them can make it refuse with ErrChanged
// (its documentation says so): the random calls make no purge.
func TestLinearizability(t *testing.T) {
	t.Parallel()
	from, to := newMemory(t), newMemory(t)
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{
		Stores: []store.Store{migratestore.New(from, to), migratestore.New(from, to)},
		Fences: true, TokensPerInstance: true, WithoutPurges: true,
	})
}
