package mysqlstore_test

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/test/mysqltest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// TestMigrateAddsPurgeLog: on a table of schema version 2 (made by an
// earlier release, without a purge log), a purge fails and deletes
// nothing; four servers migrating it at once all succeed, and a purge
// through one then reaches another's subscription.
func TestMigrateAddsPurgeLog(t *testing.T) {
	t.Parallel()
	db := mysqltest.DB(t, 2)
	table := newTableName()
	if _, err := db.ExecContext(t.Context(), strings.Replace(mysqlstore.Schema, "CREATE TABLE IF NOT EXISTS "+mysqlstore.DefaultTable, "CREATE TABLE "+table, 1)); err != nil {
		t.Fatal(err)
	}
	stores := make([]*mysqlstore.Store, 4)
	for i := range stores {
		stores[i] = mysqlstore.New(mysqltest.DB(t, 1), mysqlstore.WithTable(table), mysqlstore.WithSweepInterval(0), mysqlstore.WithInvalidationInterval(10*time.Millisecond))
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	s, sub := stores[0], stores[1]
	c, err := s.Claim(t.Context(), "k", []byte("fp"), time.Minute, store.ClaimOptions{})
	if err == nil {
		err = s.Complete(t.Context(), "k", c.Token, []byte("done"), time.Hour)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(t.Context(), "k", store.PurgeOptions{}); err == nil {
		t.Fatal("Purge on a table without its purge log succeeded")
	}
	if _, err := s.Lookup(t.Context(), "k"); err != nil {
		t.Fatalf("the key after a failed purge: %v, want it kept", err)
	}
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() { errs[i] = st.Migrate(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("server %d: Migrate of a version-2 table: %v", i, err)
		}
	}
	ch, err := sub.Invalidations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(t.Context(), "k", store.PurgeOptions{}); err != nil {
		t.Fatalf("Purge after Migrate: %v", err)
	}
	select {
	case inv := <-ch:
		if inv.All || inv.Key != "k" {
			t.Fatalf("got %+v, want the purge of k", inv)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the purge did not reach the other server's subscription within 30s")
	}
}

// TestPurgeLogIsTheFile: PurgeLog is purgelog.sql, byte for byte.
func TestPurgeLogIsTheFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("purgelog.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != mysqlstore.PurgeLog {
		t.Fatal("mysqlstore.PurgeLog differs from purgelog.sql")
	}
}
