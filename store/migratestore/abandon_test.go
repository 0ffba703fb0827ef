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
