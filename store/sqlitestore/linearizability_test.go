package sqlitestore_test

import (
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestLinearizability checks a history of concurrent calls on two stores
// over one database file, each with a pool of its own as two processes
// would have, against the model of the store contract, with both
// sweepers running. SQLite has no network to fault.
func TestLinearizability(t *testing.T) {
	t.Parallel()
	_, path := openDB(t)
	var stores []store.Store
	for range 2 {
		db, err := sqlitestore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		stores = append(stores, newStoreOn(t, db, sqlitestore.WithSweepInterval(10*time.Millisecond)))
	}
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{Stores: stores})
}
