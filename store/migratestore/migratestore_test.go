package migratestore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
)

const minute = time.Minute

// TestMoveSeesBothStores: what the old store holds is answered from it,
// the new store stays free for it, and what a moved server claims and
// completes is seen in both, by servers still on the old store alone and
// by other moved servers.
func TestMoveSeesBothStores(t *testing.T) {
	t.Parallel()
	fp, other := []byte("fp"), []byte("other fp")
	cases := map[string]struct {
		before    func(t *testing.T, from store.Store) // what the old store holds
		wantState store.State                          // what the adapter's Claim finds; 0 when it wins
		wantData  []byte
		wantFP    []byte
	}{
		"completed in the old store": {
			before: func(t *testing.T, from store.Store) {
				c := claim(t, from, fp)
				must(t, from.Complete(t.Context(), "k", c.Token, []byte("old answer"), minute))
			},
			wantState: store.StateCompleted, wantData: []byte("old answer"), wantFP: fp,
		},
		"completed in the old store, another request": {
			before: func(t *testing.T, from store.Store) {
				c := claim(t, from, other)
				must(t, from.Complete(t.Context(), "k", c.Token, []byte("old answer"), minute))
			},
			wantState: store.StateCompleted, wantData: []byte("old answer"), wantFP: other,
		},
		"in flight on a server on the old store": {
			before:    func(t *testing.T, from store.Store) { claim(t, from, fp) },
			wantState: store.StateInFlight, wantFP: fp,
		},
		"free": {before: func(*testing.T, store.Store) {}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			from, to := newMemory(t), newMemory(t)
			tc.before(t, from)
			s := migratestore.New(from, to)
			got, err := s.Claim(t.Context(), "k", fp, minute, store.ClaimOptions{})
			must(t, err)
			if tc.wantState != 0 {
				e := got.Existing
				if got.Won() || e.State != tc.wantState || !bytes.Equal(e.Data, tc.wantData) || !bytes.Equal(e.Fingerprint, tc.wantFP) {
					t.Fatalf("Claim = %+v, want the old store's %s entry", got, tc.wantState)
				}
				if c := claim(t, to, fp); !c.Won() {
					t.Fatalf("the new store kept a claim: %+v", c)
				}
				return
			}
			if !got.Won() {
				t.Fatalf("Claim of a free key = %+v, want a win", got)
			}
			wantEntry(t, "old store, while in flight", from, store.StateInFlight, nil)
			wantEntry(t, "new store, while in flight", to, store.StateInFlight, nil)
			if again, err := migratestore.New(from, to).Claim(t.Context(), "k", fp, minute, store.ClaimOptions{}); err != nil || again.Won() {
				t.Fatalf("another moved server's Claim = %+v, %v; want the key in flight", again, err)
			}
			must(t, s.Extend(t.Context(), "k", got.Token, minute))
			must(t, s.Complete(t.Context(), "k", got.Token, []byte("answer"), minute))
			wantEntry(t, "old store", from, store.StateCompleted, []byte("answer"))
			wantEntry(t, "new store", to, store.StateCompleted, []byte("answer"))
		})
	}
}

// TestMoveFailsClosed: with either store down, a Claim fails and leaves no
// claim behind; a Complete that fails in the old store is retried with the
// same token once it is back.
func TestMoveFailsClosed(t *testing.T) {
	t.Parallel()
	fp := []byte("fp")
	t.Run("old store down at the claim", func(t *testing.T) {
		t.Parallel()
		from, to := faultstore.New(newMemory(t)), newMemory(t)
		from.Down.Store(true)
		if _, err := migratestore.New(from, to).Claim(t.Context(), "k", fp, minute, store.ClaimOptions{}); !errors.Is(err, faultstore.ErrDown) {
			t.Fatalf("err = %v, want the old store's", err)
		}
		if c := claim(t, to, fp); !c.Won() {
			t.Fatalf("the new store kept a claim: %+v", c)
		}
	})
	t.Run("new store down at the claim", func(t *testing.T) {
		t.Parallel()
		from, to := newMemory(t), faultstore.New(newMemory(t))
		to.Down.Store(true)
		if _, err := migratestore.New(from, to).Claim(t.Context(), "k", fp, minute, store.ClaimOptions{}); !errors.Is(err, faultstore.ErrDown) {
			t.Fatalf("err = %v, want the new store's", err)
		}
		if c := claim(t, from, fp); !c.Won() {
			t.Fatalf("the old store got a claim: %+v", c)
		}
	})
	t.Run("old store down at the completion", func(t *testing.T) {
		t.Parallel()
		from, to := faultstore.New(newMemory(t)), newMemory(t)
		s := migratestore.New(from, to)
		c, err := s.Claim(t.Context(), "k", fp, minute, store.ClaimOptions{})
		must(t, err)
		from.Down.Store(true)
		if err := s.Complete(t.Context(), "k", c.Token, []byte("answer"), minute); !errors.Is(err, faultstore.ErrDown) {
			t.Fatalf("Complete: err = %v, want the old store's", err)
		}
		from.Down.Store(false)
		must(t, s.Complete(t.Context(), "k", c.Token, []byte("answer"), minute))
		wantEntry(t, "old store", from, store.StateCompleted, []byte("answer"))
		wantEntry(t, "new store", to, store.StateCompleted, []byte("answer"))
	})
}

func claim(t *testing.T, s store.Store, fp []byte) store.ClaimResult {
	t.Helper()
	c, err := s.Claim(t.Context(), "k", fp, minute, store.ClaimOptions{})
	must(t, err)
	return c
}

// wantEntry checks the entry under "k" without changing it: a Claim of a
// held key changes nothing.
func wantEntry(t *testing.T, what string, s store.Store, state store.State, data []byte) {
	t.Helper()
	c, err := s.Claim(context.Background(), "k", []byte("fp"), minute, store.ClaimOptions{})
	must(t, err)
	if c.Won() || c.Existing.State != state || !bytes.Equal(c.Existing.Data, data) {
		t.Fatalf("%s: %+v, want %s %q", what, c, state, data)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
