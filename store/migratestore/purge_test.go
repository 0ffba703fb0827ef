package migratestore_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
)

// TestRefusedPurgeChangesNothing: a key completed in the new store and
// still in flight in the old one (the old store's Complete failed until
// the server gave up) is a key whose purge is refused, in every form an
// operator can ask for it; the refusal changes nothing in either store,
// and once the old claim's lease has ended, a retry replays the outcome
// the new store kept. A purge used to delete the new store's outcome
// before the old store refused: the answer was FAILED_PRECONDITION, and
// the retry ran the handler a second time.
func TestRefusedPurgeChangesNothing(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		opts func(t *testing.T, s *migratestore.Store, key string) store.PurgeOptions
		want error
	}{
		"completed only": {
			opts: func(*testing.T, *migratestore.Store, string) store.PurgeOptions { return store.PurgeOptions{} },
			want: store.ErrInFlight,
		},
		"completed only, fenced by a lookup (an etag)": {
			opts: func(t *testing.T, s *migratestore.Store, key string) store.PurgeOptions {
				return store.PurgeOptions{Token: lookup(t, s, key).Token}
			},
			want: store.ErrInFlight,
		},
		"in flight, fenced by a lookup (force and an etag)": {
			opts: func(t *testing.T, s *migratestore.Store, key string) store.PurgeOptions {
				return store.PurgeOptions{InFlight: true, Token: lookup(t, s, key).Token}
			},
			want: store.ErrChanged,
		},
		"in flight": {
			opts: func(*testing.T, *migratestore.Store, string) store.PurgeOptions {
				return store.PurgeOptions{InFlight: true}
			},
			want: store.ErrChanged,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			from, to := newHooked(t), newMemory(t)
			s := migratestore.New(from, to)
			srv := idempotency.NewServer(s, idempotency.WithStoreTimeout(50*time.Millisecond))
			t.Cleanup(func() { _ = srv.Close() })
			var runs atomic.Int64
			charge := func(context.Context) (*wrapperspb.StringValue, error) {
				runs.Add(1)
				return wrapperspb.String("ch_1"), nil
			}
			do := func() (string, bool) {
				resp, replayed, err := idempotency.Do(ctx, srv, "payments.charge", "evt_1", wrapperspb.Int64(4200), charge)
				must(t, err)
				return resp.GetValue(), replayed
			}

			from.fail("complete") // the old store never takes the outcome
			if answer, replayed := do(); answer != "ch_1" || replayed {
				t.Fatalf("first call = %q, replayed %v; want the handler's answer", answer, replayed)
			}
			from.on("complete", nil)
			key, err := srv.StoreKey("payments.charge", "", "evt_1")
			must(t, err)
			wantState(t, "new store, before the purge", to, key, store.StateCompleted)
			wantState(t, "old store, before the purge", from, key, store.StateInFlight)

			if _, err := srv.Purge(ctx, key, tc.opts(t, s, key)); !errors.Is(err, tc.want) {
				t.Fatalf("Purge: %v, want a refusal matching %v", err, tc.want)
			}
			wantState(t, "new store, after the refused purge", to, key, store.StateCompleted)
			wantState(t, "old store, after the refused purge", from, key, store.StateInFlight)

			// The old claim's lease ends (a forced purge of the old store
			// alone does to it what its end does).
			if _, err := from.Store.Purge(ctx, key, store.PurgeOptions{InFlight: true}); err != nil {
				t.Fatal(err)
			}
			if answer, replayed := do(); answer != "ch_1" || !replayed || runs.Load() != 1 {
				t.Fatalf("retry after the old lease = %q, replayed %v, handler ran %d times; want the first answer replayed, one run",
					answer, replayed, runs.Load())
			}
		})
	}
}

func lookup(t *testing.T, in store.Inspector, key string) store.Info {
	t.Helper()
	info, err := in.Lookup(t.Context(), key)
	must(t, err)
	return info
}

// wantState checks the state of the entry under key in one store.
func wantState(t *testing.T, what string, in store.Inspector, key string, state store.State) {
	t.Helper()
	info, err := in.Lookup(t.Context(), key)
	if err != nil || info.State != state {
		t.Fatalf("%s: %s, %v; want %s", what, info.State, err, state)
	}
}

// TestPurgeWindows: between a purge's look at both stores and its purge
// of each, the other steps of a key may land; each leaves the key as
// the step that landed first says, and no refused purge changes
// anything.
func TestPurgeWindows(t *testing.T) {
	t.Parallel()
	fp := []byte("fp")
	// completed makes "k" completed in both stores, through s.
	completed := func(t *testing.T, s *migratestore.Store) {
		t.Helper()
		c, err := s.Claim(t.Context(), "k", fp, minute, store.ClaimOptions{})
		must(t, err)
		must(t, s.Complete(t.Context(), "k", c.Token, []byte("answer"), minute))
	}

	t.Run("the old store fails after the new store's entry went", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		from, to := newHooked(t), newHooked(t)
		s := migratestore.New(from, to)
		completed(t, s)
		from.fail("purge")
		if _, err := s.Purge(ctx, "k", store.PurgeOptions{}); !errors.Is(err, errDown) {
			t.Fatalf("Purge: %v, want the old store's error", err)
		}
		wantGone(t, "new store", to, "k")
		wantState(t, "old store", from, "k", store.StateCompleted)
		// A claim in between still replays the outcome, from the old store.
		if c, err := s.Claim(ctx, "k", fp, minute, store.ClaimOptions{}); err != nil || c.Won() || string(c.Existing.Data) != "answer" {
			t.Fatalf("Claim between = %+v, %v; want the old store's outcome", c, err)
		}
		from.on("purge", nil)
		if _, err := s.Purge(ctx, "k", store.PurgeOptions{}); err != nil {
			t.Fatalf("Purge made again: %v", err)
		}
		wantGone(t, "old store, after the purge made again", from, "k")
	})

	t.Run("the owner completes between the look and a forced purge", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		from, to := newHooked(t), newHooked(t)
		s := migratestore.New(from, to)
		c, err := s.Claim(ctx, "k", fp, minute, store.ClaimOptions{})
		must(t, err)
		to.once("purge", func() { must(t, s.Complete(ctx, "k", c.Token, []byte("answer"), minute)) })
		if _, err := s.Purge(ctx, "k", store.PurgeOptions{InFlight: true, Token: lookup(t, s, "k").Token}); !errors.Is(err, store.ErrChanged) {
			t.Fatalf("Purge: %v, want store.ErrChanged", err)
		}
		wantState(t, "new store", to, "k", store.StateCompleted)
		wantState(t, "old store", from, "k", store.StateCompleted)
	})

	t.Run("the owner completes between a forced purge's two stores", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		from, to := newHooked(t), newHooked(t)
		s := migratestore.New(from, to)
		c, err := s.Claim(ctx, "k", fp, minute, store.ClaimOptions{})
		must(t, err)
		var completeErr error
		from.once("purge", func() { completeErr = s.Complete(ctx, "k", c.Token, []byte("answer"), minute) })
		if _, err := s.Purge(ctx, "k", store.PurgeOptions{InFlight: true, Token: lookup(t, s, "k").Token}); err != nil {
			t.Fatalf("Purge: %v", err)
		}
		if !errors.Is(completeErr, store.ErrLeaseLost) {
			t.Fatalf("Complete after the new store's entry was purged: %v, want store.ErrLeaseLost", completeErr)
		}
		wantGone(t, "new store", to, "k")
		wantGone(t, "old store", from, "k")
	})

	t.Run("the old store's entry is claimed again before its purge", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		from, to := newHooked(t), newHooked(t)
		s := migratestore.New(from, to)
		completed(t, s)
		// It expires, and a server on the old store alone claims the key.
		from.once("purge", func() {
			_, err := from.Store.Purge(ctx, "k", store.PurgeOptions{})
			must(t, err)
			claim(t, from.Store, fp)
		})
		if _, err := s.Purge(ctx, "k", store.PurgeOptions{}); err != nil {
			t.Fatalf("Purge: %v, want it done: the entries it looked at are gone", err)
		}
		wantGone(t, "new store", to, "k")
		wantState(t, "old store: another claim, left alone", from, "k", store.StateInFlight)
	})

	t.Run("another purge purges first", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		from, to := newHooked(t), newHooked(t)
		s := migratestore.New(from, to)
		completed(t, s)
		fenced := lookup(t, s, "k").Token
		to.once("purge", func() {
			if _, err := s.Purge(ctx, "k", store.PurgeOptions{Token: fenced}); err != nil {
				t.Errorf("the other purge: %v", err)
			}
		})
		if _, err := s.Purge(ctx, "k", store.PurgeOptions{Token: fenced}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Purge: %v, want store.ErrNotFound: the other one purged it", err)
		}
		wantGone(t, "new store", to, "k")
		wantGone(t, "old store", from, "k")
	})
}

// TestTwoPurgesOfOneKey: two purges of one completed key. Fenced by one
// lookup (an etag), only one succeeds. Without a fence, one that looks at
// the key after the other has purged the new store's entry and before it
// has purged the old one's finds the old store's entry alone, as a lookup
// then does, and purges it: both succeed, and the key is purged once.
func TestTwoPurgesOfOneKey(t *testing.T) {
	t.Parallel()
	fp := []byte("fp")
	for name, tc := range map[string]struct {
		fenced  bool
		wantErr error // of the purge that comes second
	}{
		"fenced by one lookup": {fenced: true, wantErr: store.ErrNotFound},
		"without a fence":      {fenced: false, wantErr: nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			from, to := newHooked(t), newHooked(t)
			s := migratestore.New(from, to)
			c, err := s.Claim(ctx, "k", fp, minute, store.ClaimOptions{})
			must(t, err)
			must(t, s.Complete(ctx, "k", c.Token, []byte("answer"), minute))
			var opts store.PurgeOptions
			if tc.fenced {
				opts.Token = lookup(t, s, "k").Token
			}
			// The second purge runs whole between the first one's purge of
			// the new store and its purge of the old one.
			var secondErr error
			from.once("purge", func() { _, secondErr = s.Purge(ctx, "k", opts) })
			if _, err := s.Purge(ctx, "k", opts); err != nil {
				t.Fatalf("first Purge: %v", err)
			}
			if !errors.Is(secondErr, tc.wantErr) || (tc.wantErr == nil && secondErr != nil) {
				t.Fatalf("second Purge: %v, want %v", secondErr, tc.wantErr)
			}
			wantGone(t, "new store", to, "k")
			wantGone(t, "old store", from, "k")
		})
	}
}

// wantGone checks that key holds no entry in one store.
func wantGone(t *testing.T, what string, in store.Inspector, key string) {
	t.Helper()
	if info, err := in.Lookup(t.Context(), key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: %s, %v; want no entry", what, info.State, err)
	}
}

// TestPurgeForeignToken: a token that is not one of the adapter's names
// no entry, and a purge fenced by it is refused with store.ErrChanged
// whenever either store holds the key, as the store contract says, and
// changes nothing. Among such tokens is the old store's own token of the
// entry, as an operator read it from a server on the old store alone
// before the move. A key only the old store held (completed before the
// move) used to be answered store.ErrNotFound, as if it held nothing.
func TestPurgeForeignToken(t *testing.T) {
	t.Parallel()
	fp := []byte("fp")
	ctx := t.Context()
	from, to := newMemory(t), newMemory(t)
	s := migratestore.New(from, to)
	c := claim(t, from, fp) // before the move
	must(t, from.Complete(ctx, "k", c.Token, []byte("answer"), minute))
	for _, token := range []string{"not-a-token", lookup(t, from, "k").Token} {
		info, err := s.Purge(ctx, "k", store.PurgeOptions{Token: token})
		if !errors.Is(err, store.ErrChanged) || string(info.Data) != "answer" {
			t.Fatalf("Purge fenced by %q: %s %q, %v; want store.ErrChanged and the entry", token, info.State, info.Data, err)
		}
		wantState(t, "old store", from, "k", store.StateCompleted)
		wantGone(t, "new store", to, "k")
	}
	if _, err := s.Purge(ctx, "gone", store.PurgeOptions{Token: "not-a-token"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Purge of a key neither store holds: %v, want store.ErrNotFound", err)
	}
}
