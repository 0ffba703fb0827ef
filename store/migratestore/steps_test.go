package migratestore_test

import (
	"errors"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
)

// TestStepWindows: each step that writes both stores (Claim, Complete,
// Release, Extend), with one store's half landing and the other's failing
// or refused, returns an error and leaves a key that no Claim wins while
// a claim of a handler that may run holds it, and that loses no stored
// outcome.
func TestStepWindows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	fp := []byte("fp")
	// inFlight checks that a Claim through another moved server's adapter
	// finds the key in flight: it wins nothing, and no handler runs.
	inFlight := func(t *testing.T, from, to store.Store) {
		t.Helper()
		c, err := migratestore.New(from, to).Claim(ctx, "k", fp, minute, store.ClaimOptions{})
		if err != nil || c.Won() || c.Existing.State != store.StateInFlight {
			t.Fatalf("Claim = %+v, %v; want the key in flight", c, err)
		}
	}

	t.Run("claim: the old store holds the key, the new claim's release fails", func(t *testing.T) {
		t.Parallel()
		from, to := newHooked(t), newHooked(t)
		claim(t, from.Store, fp) // a server on the old store alone runs it
		to.fail("release")
		if c, err := migratestore.New(from, to).Claim(ctx, "k", fp, minute, store.ClaimOptions{}); !errors.Is(err, errDown) || c.Won() {
			t.Fatalf("Claim = %+v, %v; want the new store's error and no claim", c, err)
		}
		to.on("release", nil)
		wantState(t, "new store: the claim left to its lease", to, "k", store.StateInFlight)
		inFlight(t, from, to)
	})

	t.Run("claim: the old store's claim lands, its reply is lost", func(t *testing.T) {
		t.Parallel()
		from, to := newHooked(t), newHooked(t)
		from.on("claim", func() error {
			claim(t, from.Store, fp)
			return errDown
		})
		if c, err := migratestore.New(from, to).Claim(ctx, "k", fp, minute, store.ClaimOptions{}); !errors.Is(err, errDown) || c.Won() {
			t.Fatalf("Claim = %+v, %v; want the old store's error and no claim", c, err)
		}
		from.on("claim", nil)
		wantGone(t, "new store: its claim released", to, "k")
		inFlight(t, from, to) // until the old claim's lease ends
	})

	t.Run("complete: the old store fails", func(t *testing.T) {
		t.Parallel()
		from, to := newHooked(t), newHooked(t)
		s := migratestore.New(from, to)
		c := claim(t, s, fp)
		from.fail("complete")
		if err := s.Complete(ctx, "k", c.Token, []byte("answer"), minute); !errors.Is(err, errDown) {
			t.Fatalf("Complete: %v, want the old store's error", err)
		}
		from.on("complete", nil)
		// The outcome is in the new store, which moved servers answer from.
		wantEntry(t, "new store", to, store.StateCompleted, []byte("answer"))
		wantState(t, "old store", from, "k", store.StateInFlight)
		if again, err := migratestore.New(from, to).Claim(ctx, "k", fp, minute, store.ClaimOptions{}); err != nil || string(again.Existing.Data) != "answer" {
			t.Fatalf("Claim = %+v, %v; want the outcome", again, err)
		}
	})

	t.Run("complete: the new store's claim was lost", func(t *testing.T) {
		t.Parallel()
		from, to := newHooked(t), newHooked(t)
		s := migratestore.New(from, to)
		c := claim(t, s, fp)
		_, err := to.Store.Purge(ctx, "k", store.PurgeOptions{InFlight: true}) // as its lease's end
		must(t, err)
		if err := s.Complete(ctx, "k", c.Token, []byte("answer"), minute); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Complete: %v, want store.ErrLeaseLost", err)
		}
		// The old store is left to its lease: the claim is lost, and a
		// retry after it runs the handler again, as on one store.
		wantState(t, "old store", from, "k", store.StateInFlight)
		inFlight(t, from, to)
	})

	for _, failing := range []string{"old", "new"} {
		t.Run("release: the "+failing+" store fails", func(t *testing.T) {
			t.Parallel()
			from, to := newHooked(t), newHooked(t)
			down := map[string]*hooked{"old": from, "new": to}[failing]
			s := migratestore.New(from, to)
			c := claim(t, s, fp)
			down.fail("release")
			if err := s.Release(ctx, "k", c.Token); !errors.Is(err, errDown) {
				t.Fatalf("Release: %v, want the %s store's error", err, failing)
			}
			down.on("release", nil)
			inFlight(t, from, to) // held by the half not released
			must(t, s.Release(ctx, "k", c.Token))
			wantGone(t, "new store", to, "k")
			wantGone(t, "old store", from, "k")
		})
	}

	for _, failing := range []string{"old", "new"} {
		t.Run("extend: the "+failing+" store fails", func(t *testing.T) {
			t.Parallel()
			from, to := newHooked(t), newHooked(t)
			down := map[string]*hooked{"old": from, "new": to}[failing]
			s := migratestore.New(from, to)
			c := claim(t, s, fp)
			down.fail("extend")
			if err := s.Extend(ctx, "k", c.Token, minute); !errors.Is(err, errDown) {
				t.Fatalf("Extend: %v, want the %s store's error: the lease is renewed only when both are", err, failing)
			}
			down.on("extend", nil)
			_, err := down.Store.Purge(ctx, "k", store.PurgeOptions{InFlight: true}) // as its lease's end
			must(t, err)
			if err := s.Extend(ctx, "k", c.Token, minute); !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("Extend after the %s store's claim ended: %v, want store.ErrLeaseLost", failing, err)
			}
		})
	}
}
