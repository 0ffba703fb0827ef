package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// MigrateStore is a store that creates its own schema, as the SQL stores
// (mysqlstore, postgresstore, sqlitestore) do.
type MigrateStore interface {
	store.Store
	// Migrate creates the store's table, or changes nothing when it is
	// there.
	Migrate(ctx context.Context) error
}

// RunMigrate runs the migration suite: the cases every SQL store's
// Migrate passes. newServers returns n stores on one new table, not yet
// migrated, each on a pool of its own as n servers' would be, closed when
// the test ends.
func RunMigrate(t *testing.T, newServers func(t *testing.T, n int) []MigrateStore) {
	t.Helper()
	t.Run("ManyServersAtOnce", func(t *testing.T) {
		t.Parallel()
		migrateManyServersAtOnce(t, newServers)
	})
}

// migrateManyServersAtOnce: eight servers, each with a pool of its own,
// migrate the same table at the same moment, then again: every call
// succeeds and the table works.
func migrateManyServersAtOnce(t *testing.T, newServers func(t *testing.T, n int) []MigrateStore) {
	const servers = 8
	stores := newServers(t, servers)
	for round := range 2 {
		errs := make([]error, servers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Go(func() {
				<-start
				errs[i] = s.Migrate(t.Context())
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, server %d: Migrate: %v", round, i, err)
			}
		}
	}
	c, err := stores[0].Claim(t.Context(), "k", []byte("fp"), time.Minute, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim on the migrated table: %v, won=%v", err, c.Won())
	}
}
