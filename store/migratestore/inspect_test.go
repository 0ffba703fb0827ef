package migratestore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
)

// complete claims and completes key in s with data.
func complete(t *testing.T, s store.Store, key string, data string) {
	t.Helper()
	c, err := s.Claim(t.Context(), key, []byte("fp"), minute, store.ClaimOptions{})
	must(t, err)
	must(t, s.Complete(t.Context(), key, c.Token, []byte(data), minute))
}

// TestInspectOverBothStores: Lookup finds a key in either store, the new
// one first; List walks both, so a key both hold is listed twice; Stats
// add up, counting such a key twice; Purge empties both.
func TestInspectOverBothStores(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	from, to := newMemory(t), newMemory(t)
	s := migratestore.New(from, to)
	complete(t, from, "old only", "old answer")
	complete(t, s, "both", "answer")

	for key, want := range map[string]string{"old only": "old answer", "both": "answer"} {
		info, err := s.Lookup(ctx, key)
		if err != nil || string(info.Data) != want {
			t.Fatalf("Lookup(%q) = %q, %v; want %q", key, info.Data, err, want)
		}
	}
	if _, err := s.Lookup(ctx, "free"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Lookup of a free key: %v", err)
	}

	listed := map[string]int{}
	var page store.Page
	for first := true; first || page.Next != ""; first = false {
		var err error
		page, err = s.List(ctx, store.ListOptions{Cursor: page.Next, Limit: 1})
		must(t, err)
		for _, info := range page.Entries {
			listed[info.Key]++
		}
	}
	if listed["both"] != 2 || listed["old only"] != 1 || len(listed) != 2 {
		t.Fatalf("listed %v; want both twice, old only once", listed)
	}

	st, err := s.Stats(ctx)
	must(t, err)
	if st.Completed.Entries != 3 || st.InFlight.Entries != 0 {
		t.Fatalf("Stats = %+v; want 3 completed entries (one key in both stores)", st)
	}

	for _, key := range []string{"old only", "both"} {
		if _, err := s.Purge(ctx, key, store.PurgeOptions{}); err != nil {
			t.Fatalf("Purge(%q): %v", key, err)
		}
		for name, one := range map[string]store.Inspector{"old": from, "new": to} {
			if _, err := one.Lookup(ctx, key); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("after Purge(%q), the %s store's Lookup: %v", key, name, err)
			}
		}
	}
}

// TestPurgeFenceLeavesUnseenStore: a Purge fenced by a Lookup's Token
// leaves alone an entry that a store which held none when it was looked
// at holds now (another entry, claimed since by a server on the old store
// alone).
func TestPurgeFenceLeavesUnseenStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	from, to := newMemory(t), newMemory(t)
	s := migratestore.New(from, to)
	complete(t, to, "k", "new answer")
	info, err := s.Lookup(ctx, "k")
	must(t, err)
	complete(t, from, "k", "claimed since")
	if _, err := s.Purge(ctx, "k", store.PurgeOptions{Token: info.Token}); err != nil {
		t.Fatal(err)
	}
	if got, err := from.Lookup(ctx, "k"); err != nil || string(got.Data) != "claimed since" {
		t.Fatalf("the old store's entry: %q, %v; want it left alone", got.Data, err)
	}
}

// TestInspectNeedsInspectors: a store that is not a store.Inspector makes
// every method fail with errors.ErrUnsupported, naming which.
func TestInspectNeedsInspectors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := migratestore.New(plain{newMemory(t)}, newMemory(t))
	_, err1 := s.Lookup(ctx, "k")
	_, err2 := s.List(ctx, store.ListOptions{})
	_, err3 := s.Purge(ctx, "k", store.PurgeOptions{})
	_, err4 := s.Stats(ctx)
	_, err5 := migratestore.New(plain{newMemory(t)}, plain{newMemory(t)}).Invalidations(ctx)
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("err = %v, want one matching errors.ErrUnsupported", err)
		}
	}
}

// plain hides everything of a store but store.Store.
type plain struct{ store.Store }

// TestInvalidationsOfBothStores: a purge in either store, through the
// adapter or not, reaches a subscriber of the adapter; the channel closes
// when its context ends.
func TestInvalidationsOfBothStores(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	from, to := newMemory(t), newMemory(t)
	s := migratestore.New(from, to)
	ch, err := s.Invalidations(ctx)
	must(t, err)
	complete(t, from, "old", "x")
	complete(t, to, "new", "x")
	for _, one := range []store.Inspector{from, to} {
		for _, key := range []string{"old", "new"} {
			_, _ = one.Purge(ctx, key, store.PurgeOptions{})
		}
	}
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case inv := <-ch:
			got[inv.Key] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("got %v, want old and new", got)
		}
	}
	cancel()
	for range ch {
	}
}

// TestInspectErrorOfOneStore: an error of either store is returned.
func TestInspectErrorOfOneStore(t *testing.T) {
	t.Parallel()
	errDown := errors.New("down")
	s := migratestore.New(down{newMemory(t), errDown}, newMemory(t))
	if _, err := s.Lookup(t.Context(), "k"); !errors.Is(err, errDown) {
		t.Fatalf("Lookup: %v, want the old store's error", err)
	}
}

// down is a memory store whose Lookup fails.
type down struct {
	*memorystore.Store
	err error
}

func (d down) Lookup(context.Context, string) (store.Info, error) { return store.Info{}, d.err }
