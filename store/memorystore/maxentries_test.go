package memorystore_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// fill claims n keys k0..k(n-1) with lease and returns their tokens.
func fill(t *testing.T, s *memorystore.Store, n int, lease time.Duration) []string {
	t.Helper()
	toks := make([]string, n)
	for i := range n {
		c, err := s.Claim(t.Context(), fmt.Sprint("k", i), nil, lease, store.ClaimOptions{})
		if err != nil || !c.Won() {
			t.Fatalf("Claim k%d: won=%v err=%v", i, c.Won(), err)
		}
		toks[i] = c.Token
	}
	return toks
}

func wantFull(t *testing.T, s *memorystore.Store, key string) {
	t.Helper()
	if c, err := s.Claim(t.Context(), key, nil, time.Minute, store.ClaimOptions{}); !errors.Is(err, store.ErrFull) {
		t.Fatalf("Claim of new key %q in a full store: won=%v err=%v, want store.ErrFull", key, c.Won(), err)
	}
}

func TestMaxEntriesNeverEvicts(t *testing.T) {
	t.Parallel()
	s, ctx := newStore(t, memorystore.WithMaxEntries(3)), t.Context()
	toks := fill(t, s, 3, time.Minute)
	wantFull(t, s, "new")

	// A completed outcome takes room too, and stays.
	if err := s.Complete(ctx, "k0", toks[0], []byte("kept"), time.Minute); err != nil {
		t.Fatal(err)
	}
	wantFull(t, s, "new")
	c, err := s.Claim(ctx, "k0", nil, time.Minute, store.ClaimOptions{})
	if err != nil || c.Existing.State != store.StateCompleted || string(c.Existing.Data) != "kept" {
		t.Fatalf("completed k0 in a full store: %+v, %v", c, err)
	}
	// Existing in-flight keys are still answered, not refused.
	c, err = s.Claim(ctx, "k1", nil, time.Minute, store.ClaimOptions{})
	if err != nil || c.Existing.State != store.StateInFlight {
		t.Fatalf("in-flight k1 in a full store: %+v, %v", c, err)
	}
	for i := 1; i < 3; i++ {
		if err := s.Extend(ctx, fmt.Sprint("k", i), toks[i], time.Minute); err != nil {
			t.Fatalf("Extend of k%d in a full store: %v", i, err)
		}
	}
	if n := s.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}

	// Releasing makes room for exactly one.
	if err := s.Release(ctx, "k1", toks[1]); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, "new", nil, time.Minute, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("Claim after a release: won=%v err=%v", c.Won(), err)
	}
	wantFull(t, s, "newer")
}

func TestMaxEntriesDropsExpired(t *testing.T) {
	t.Parallel()
	s := newStore(t, memorystore.WithMaxEntries(4), memorystore.WithSweepInterval(0))
	ctx := t.Context()
	fill(t, s, 2, time.Minute)
	c, _ := s.Claim(ctx, "short-lease", nil, 20*time.Millisecond, store.ClaimOptions{})
	d, _ := s.Claim(ctx, "short-retention", nil, time.Minute, store.ClaimOptions{})
	if err := s.Complete(ctx, "short-retention", d.Token, nil, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	wantFull(t, s, "a")
	time.Sleep(50 * time.Millisecond)
	if n := s.Len(); n != 4 {
		t.Fatalf("Len = %d before the full store made room, want 4 (sweeper is off)", n)
	}
	for _, key := range []string{"a", "b"} {
		if c, err := s.Claim(ctx, key, nil, time.Minute, store.ClaimOptions{}); err != nil || !c.Won() {
			t.Fatalf("Claim %q once two entries expired: won=%v err=%v", key, c.Won(), err)
		}
	}
	wantFull(t, s, "c")
	if err := s.Release(ctx, "short-lease", c.Token); err != nil {
		t.Fatalf("Release of a dropped claim: %v, want nil (nothing left to release)", err)
	}
	if n := s.Len(); n != 4 {
		t.Fatalf("Len = %d, want 4", n)
	}
}

func TestMaxEntriesReclaimsExpiredKeyInPlace(t *testing.T) {
	t.Parallel()
	s := newStore(t, memorystore.WithMaxEntries(1), memorystore.WithSweepInterval(0))
	fill(t, s, 1, 10*time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	// The same key: its expired entry is replaced, no room needed.
	if c, err := s.Claim(t.Context(), "k0", nil, time.Minute, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("reclaim of an expired key in a full store: won=%v err=%v", c.Won(), err)
	}
	wantFull(t, s, "other")
}

func TestMaxEntriesConcurrent(t *testing.T) {
	t.Parallel()
	const limit, claimers = 10, 200
	s := newStore(t, memorystore.WithMaxEntries(limit))
	var won, full atomic.Int64
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Go(func() {
			c, err := s.Claim(t.Context(), fmt.Sprint("k", i), nil, time.Minute, store.ClaimOptions{})
			switch {
			case errors.Is(err, store.ErrFull):
				full.Add(1)
			case err != nil:
				t.Error(err)
			case c.Won():
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != limit || full.Load() != claimers-limit {
		t.Fatalf("won %d, full %d; want %d and %d", won.Load(), full.Load(), limit, claimers-limit)
	}
	if n := s.Len(); n != limit {
		t.Fatalf("Len = %d, want %d", n, limit)
	}
}

// A closed store has no sweeper; a full one must still make room on the
// caller's path once entries expire, for as long as it is used. The test
// runs on synctest's fake clock, so a loaded machine cannot let a lease run
// out between two steps that must see it live.
func TestMaxEntriesMakesRoomAfterClose(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opt  memorystore.Option
	}{
		{"Sweeper", memorystore.WithSweepInterval(time.Hour)},
		{"NoSweeper", memorystore.WithSweepInterval(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s := newStore(t, memorystore.WithMaxEntries(4), tc.opt)
				fill(t, s, 4, 20*time.Millisecond)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				wantFull(t, s, "early")
				time.Sleep(50 * time.Millisecond)
				for round := range 3 {
					for i := range 4 {
						key := fmt.Sprint("round", round, "-", i)
						c, err := s.Claim(t.Context(), key, nil, 10*time.Millisecond, store.ClaimOptions{})
						if err != nil || !c.Won() {
							t.Fatalf("Claim %q in a closed store whose entries expired: won=%v err=%v", key, c.Won(), err)
						}
					}
					wantFull(t, s, fmt.Sprint("round", round, "-full"))
					time.Sleep(30 * time.Millisecond)
				}
			})
		})
	}
}

// A full store in which every claimer leaves an expired entry behind has
// room for every claim: room made by one claimer is not taken by another
// while it comes back for it.
func TestMaxEntriesSteadyExpiryNeverRefuses(t *testing.T) {
	t.Parallel()
	const limit, claimers, rounds = 1000, 8, 300
	s := newStore(t, memorystore.WithMaxEntries(limit), memorystore.WithSweepInterval(0))
	ctx := t.Context()
	fill(t, s, limit-claimers, time.Minute)
	for i := range claimers {
		c, err := s.Claim(ctx, fmt.Sprint("seed", i), nil, time.Minute, store.ClaimOptions{})
		if err != nil || !c.Won() {
			t.Fatalf("Claim seed%d: won=%v err=%v", i, c.Won(), err)
		}
		if err := s.Complete(ctx, fmt.Sprint("seed", i), c.Token, nil, time.Nanosecond); err != nil {
			t.Fatal(err)
		}
	}
	var refused atomic.Int64
	var wg sync.WaitGroup
	for w := range claimers {
		wg.Go(func() {
			for i := range rounds {
				key := fmt.Sprint("w", w, "-", i)
				c, err := s.Claim(ctx, key, nil, time.Minute, store.ClaimOptions{})
				if errors.Is(err, store.ErrFull) {
					refused.Add(1)
					continue
				}
				if err != nil || !c.Won() {
					t.Errorf("Claim %q: won=%v err=%v", key, c.Won(), err)
					return
				}
				if err := s.Complete(ctx, key, c.Token, nil, time.Nanosecond); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d of %d claims refused with store.ErrFull although each claimer left an expired entry to drop", n, claimers*rounds)
	}
	if n := s.Len(); n > limit {
		t.Fatalf("Len = %d, over the limit %d", n, limit)
	}
}
