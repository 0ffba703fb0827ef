package memorystore_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// TestStatsExact: the memory store's Stats are exact, follow every step
// (claim, complete, release, purge, a claim over an expired entry) and
// leave out expired entries the sweeper has not removed yet.
func TestStatsExact(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t, memorystore.WithSweepInterval(0)), t.Context()
	want := func(what string, inFlight, inBytes, done, doneBytes int64) {
		t.Helper()
		got, err := s.Stats(ctx)
		w := store.Stats{InFlight: store.Count{Entries: inFlight, Bytes: inBytes}, Completed: store.Count{Entries: done, Bytes: doneBytes}}
		if err != nil || got != w {
			t.Fatalf("%s: Stats = %+v, %v; want %+v", what, got, err, w)
		}
	}
	fp := []byte("fingerprint") // 11 bytes; keys are 2
	want("empty", 0, 0, 0, 0)
	toks := map[string]string{}
	for i := range 4 {
		k := "k" + strconv.Itoa(i)
		c, err := s.Claim(ctx, k, fp, time.Minute, store.ClaimOptions{})
		if err != nil || !c.Won() {
			t.Fatal(c, err)
		}
		toks[k] = c.Token
	}
	want("four in flight", 4, 4*13, 0, 0)
	if err := s.Complete(ctx, "k0", toks["k0"], []byte("data"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "k1", toks["k1"], []byte("data"), time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	want("two completed, one of them expired", 2, 2*13, 1, 17)
	if err := s.Release(ctx, "k2", toks["k2"]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(ctx, "k0", store.PurgeOptions{}); err != nil {
		t.Fatal(err)
	}
	want("released one, purged one", 1, 13, 0, 0)
	// k1 expired: a claim takes it over in place.
	if c, err := s.Claim(ctx, "k1", []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatal(c, err)
	}
	want("claimed over an expired entry", 2, 13+4, 0, 0)
	if s.Len() != 2 {
		t.Fatalf("Len = %d after Stats removed the expired entry, want 2", s.Len())
	}
}

// TestListAcrossShrink: a walk of List returns every entry that lives
// through it, although shards rebuild their maps meanwhile (a shard that
// fell to a quarter of its peak moves its entries to other slots).
func TestListAcrossShrink(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t, memorystore.WithSweepInterval(0)), t.Context()
	const n, kept = 40_000, 500 // about 600 entries per shard, over shrink's minimum of 256
	toks := make([]string, n)
	for i := range n {
		c, err := s.Claim(ctx, "k"+strconv.Itoa(i), []byte("fp"), time.Hour, store.ClaimOptions{})
		if err != nil || !c.Won() {
			t.Fatal(c, err)
		}
		toks[i] = c.Token
	}
	seen := map[string]int{}
	walk := func(cursor string, pages int) string {
		for ; pages != 0; pages-- {
			page, err := s.List(ctx, store.ListOptions{Cursor: cursor, Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			for _, info := range page.Entries {
				seen[info.Key]++
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		return cursor
	}
	cursor := walk("", 300) // about a third of the way
	// The entries kept are the last claimed, in the last slots of their
	// shards: the shard the walk is in has not reached them yet, and its
	// rebuilt map puts them in its first slots.
	for i := range n - kept {
		if err := s.Release(ctx, "k"+strconv.Itoa(i), toks[i]); err != nil {
			t.Fatal(err)
		}
	}
	walk(cursor, -1)
	for i := n - kept; i < n; i++ {
		if seen["k"+strconv.Itoa(i)] == 0 {
			t.Fatalf("the walk missed k%d, which lived through it", i)
		}
	}
}

// TestInvalidationsTwoSubscribers: two servers sharing one memory store
// each subscribe; a purge by either reaches both.
func TestInvalidationsTwoSubscribers(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), t.Context()
	a, _ := s.Invalidations(ctx)
	b, _ := s.Invalidations(ctx)
	c, _ := s.Claim(ctx, "key", []byte("fp"), time.Minute, store.ClaimOptions{})
	if err := s.Complete(ctx, "key", c.Token, []byte("data"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purge(ctx, "key", store.PurgeOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan store.Invalidation{a, b} {
		select {
		case inv := <-ch:
			if inv != (store.Invalidation{Key: "key"}) {
				t.Fatalf("got %+v, want the purge of key", inv)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no invalidation")
		}
	}
}

// TestInvalidationsSlowSubscriber: a purge never waits for a subscriber
// that does not read; once more than 1,024 purges wait for it, it is told
// to drop everything instead (All). The subscriber's goroutine may hold a
// batch it took from the queue, of 1,024 at most, so 3,000 purges overflow
// the queue whenever it took it.
func TestInvalidationsSlowSubscriber(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), t.Context()
	ch, err := s.Invalidations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for i := range n {
		k := "k" + strconv.Itoa(i)
		c, _ := s.Claim(ctx, k, []byte("fp"), time.Minute, store.ClaimOptions{})
		if _, err := s.Purge(ctx, k, store.PurgeOptions{InFlight: true, Token: c.Token}); err != nil {
			t.Fatal(err)
		}
	}
	keys := 0
	for {
		select {
		case inv := <-ch:
			if inv.All {
				if keys >= n {
					t.Fatalf("All after all %d keys", keys)
				}
				return
			}
			keys++
		case <-time.After(10 * time.Second):
			t.Fatalf("no All after %d keys", keys)
		}
	}
}

// TestPurgeTokenSpellings: a purge fenced by a token is fenced by that
// exact token: another spelling of the same number is not it.
func TestPurgeTokenSpellings(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t), t.Context()
	c, _ := s.Claim(ctx, "key", []byte("fp"), time.Minute, store.ClaimOptions{})
	for _, tok := range []string{"0" + c.Token, c.Token + " ", "x"} {
		if _, err := s.Purge(ctx, "key", store.PurgeOptions{InFlight: true, Token: tok}); !errors.Is(err, store.ErrChanged) {
			t.Fatalf("Purge with token %q: %v, want store.ErrChanged", tok, err)
		}
	}
}

// FuzzListCursor: a cursor from outside never makes List panic: it is
// either one the store reads (a page) or refused with store.ErrCursor.
func FuzzListCursor(f *testing.F) {
	s := memorystore.New(memorystore.WithSweepInterval(0))
	defer s.Close()
	for i := range 300 {
		_, _ = s.Claim(f.Context(), "k"+strconv.Itoa(i), []byte("fp"), time.Hour, store.ClaimOptions{})
	}
	page, _ := s.List(f.Context(), store.ListOptions{Limit: 7})
	f.Add(page.Next)
	f.Add("m1.63.0.99999999")
	f.Add("m1.64.0.0")
	f.Add("m1.-1.0.0")
	f.Add("m1.1.18446744073709551615.1")
	f.Add("")
	f.Fuzz(func(t *testing.T, cursor string) {
		_, err := s.List(t.Context(), store.ListOptions{Cursor: cursor, Limit: 7})
		if err != nil && !errors.Is(err, store.ErrCursor) {
			t.Fatalf("List(cursor %q): %v, want nil or store.ErrCursor", cursor, err)
		}
	})
}
