package migratestore_test

import (
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
)

// TestTakeOverOfAnOldAbandonedEntry: a key abandoned by a server on the
// old store alone (it died mid-handler before the adapter was rolled out)
// is taken over through the adapter as the attempt after the abandoned
// one, with when that attempt was claimed: an Attempt of 1 would run the
// handler again under AbandonRecover instead of the RecoverFunc, since the
// engine recovers only a claim that says it took another over.
func TestTakeOverOfAnOldAbandonedEntry(t *testing.T) {
	t.Parallel()
	fp, keep := []byte("fp"), time.Hour
	from, to := newMemory(t), newMemory(t)
	first, err := from.Claim(t.Context(), "k", fp, minute, store.ClaimOptions{Keep: keep, TakeOver: true})
	must(t, err)
	must(t, from.Abandon(t.Context(), "k", first.Token)) // its server died

	s := migratestore.New(from, to)
	got, err := s.Claim(t.Context(), "k", fp, minute, store.ClaimOptions{Keep: keep, TakeOver: true})
	must(t, err)
	if !got.Won() || got.Attempt != 2 || got.Previous.IsZero() {
		t.Fatalf("Claim = won %v, Attempt %d, Previous %v; want the take-over of attempt 1: won, Attempt 2, Previous set", got.Won(), got.Attempt, got.Previous)
	}
}

// TestRefusedTakeOverStaysAbandoned (decision 293): a take-over in the new
// store that the old store refuses (it holds the key in flight, by its
// clock) is given back abandoned, not released: the key never becomes free
// in the new store for a first attempt that would not know of the
// abandoned one.
func TestRefusedTakeOverStaysAbandoned(t *testing.T) {
	t.Parallel()
	fp, keep := []byte("fp"), time.Hour
	from, to := newMemory(t), newMemory(t)
	first, err := to.Claim(t.Context(), "k", fp, minute, store.ClaimOptions{Keep: keep, TakeOver: true})
	must(t, err)
	must(t, to.Abandon(t.Context(), "k", first.Token)) // abandoned in the new store
	claim(t, from, fp)                                 // still in flight in the old one

	s := migratestore.New(from, to)
	got, err := s.Claim(t.Context(), "k", fp, minute, store.ClaimOptions{Keep: keep, TakeOver: true})
	must(t, err)
	if got.Won() || got.Existing.State != store.StateInFlight {
		t.Fatalf("Claim = %+v; want the old store's entry in flight", got)
	}
	info, err := to.Lookup(t.Context(), "k")
	if err != nil || info.State != store.StateAbandoned {
		t.Fatalf("the new store's entry: %+v, %v; want it abandoned still", info, err)
	}
}
