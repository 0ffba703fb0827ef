package sqlitestore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// TestPurgeOfAnEntryAbandonedMeanwhile: a purge whose entry its owner
// abandoned between the purge's read and its delete answers from the entry
// it deleted, abandoned, not from what it read first (in flight). It used
// to delete the abandoned entry and report it in flight: the linearizability
// check (TestLinearizability) found such a history.
func TestPurgeOfAnEntryAbandonedMeanwhile(t *testing.T) {
	t.Parallel()
	var (
		s    *sqlitestore.Store
		once sync.Once
		tok  string
	)
	s, _ = newStore(t, sqlitestore.OnPurgeRead(func() {
		once.Do(func() {
			if err := s.Abandon(t.Context(), "k", tok); err != nil {
				t.Errorf("Abandon between the purge's read and its delete: %v", err)
			}
		})
	}))
	cl, err := s.Claim(t.Context(), "k", []byte("fp"), time.Hour, store.ClaimOptions{Keep: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tok = cl.Token
	info, err := s.Purge(t.Context(), "k", store.PurgeOptions{InFlight: true, Token: tok})
	if err != nil || info.State != store.StateAbandoned || info.Token != tok {
		t.Fatalf("Purge = %+v, %v; want the entry it deleted, abandoned, owned by %s", info, err, tok)
	}
	if got, err := s.Lookup(t.Context(), "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Lookup after the purge = %+v, %v; want ErrNotFound", got, err)
	}
}
