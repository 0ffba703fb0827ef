package idempotency_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// cacheStats returns srv's replay cache figures, failing the test when it
// has no cache.
func cacheStats(t *testing.T, srv *idempotency.Server) idempotency.ReplayCacheStats {
	t.Helper()
	st, ok := srv.ReplayCacheStats()
	if !ok {
		t.Fatal("ReplayCacheStats: false for a server with a replay cache")
	}
	return st
}

// TestReplayCacheStats: a cache filled past either bound holds what the
// bound allows, counts its entries and their bytes, and counts each entry
// evicted to make room; a replay from it, and a new key once there is
// room, evict nothing.
func TestReplayCacheStats(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 4000)
	cases := []struct {
		name       string
		maxEntries int
		maxBytes   int64
		payload    string
	}{
		// Two entries, by count or by bytes (a record of ~4 KB, and the
		// 192-byte overhead, fit twice in 10 KB and not three times).
		{"entries", 2, 1 << 20, "small"},
		{"bytes", 1000, 10_000, big},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil, idempotency.WithReplayCache(tc.maxEntries, tc.maxBytes, time.Hour))
			req := &testingv1.DoRequest{Payload: tc.payload}
			do := func(key string) {
				t.Helper()
				if _, err := f.Client.Do(withKey(t.Context(), key), req); err != nil {
					t.Fatal(err)
				}
			}
			if got := cacheStats(t, f.Idempotency); got != (idempotency.ReplayCacheStats{MaxEntries: tc.maxEntries, MaxBytes: tc.maxBytes}) {
				t.Fatalf("before any call: %+v, want an empty cache with its bounds", got)
			}
			do("k-a")
			one := cacheStats(t, f.Idempotency)
			if one.Entries != 1 || one.Bytes < int64(len(tc.payload))+192 || one.Evictions != 0 {
				t.Fatalf("after one call: %+v, want 1 entry of at least %d bytes, no eviction", one, len(tc.payload)+192)
			}
			do("k-b")
			do("k-c") // evicts k-a
			got := cacheStats(t, f.Idempotency)
			if got.Entries != 2 || got.Evictions != 1 || got.Bytes <= one.Bytes || got.Bytes > tc.maxBytes ||
				got.MaxEntries != tc.maxEntries || got.MaxBytes != tc.maxBytes {
				t.Fatalf("after 3 keys: %+v, want 2 entries within %d bytes, 1 eviction", got, tc.maxBytes)
			}
			wantCached(t, f, "k-c", req)
			if after := cacheStats(t, f.Idempotency); after != got {
				t.Fatalf("after a cached replay: %+v, want %+v unchanged", after, got)
			}
			do("k-a") // replayed from the store, cached again: evicts k-b
			do("k-d") // evicts k-c
			if got := cacheStats(t, f.Idempotency); got.Entries != 2 || got.Evictions != 3 {
				t.Fatalf("after 2 more keys: %+v, want 2 entries, 3 evictions", got)
			}
		})
	}
}

// TestReplayCacheStatsNotEvictions: an entry dropped by a purge, or by
// Close, is not an eviction; nor is one past its expiry that a new entry
// replaces at the back of the cache (the cache was not too small for it).
// The expiry runs on synctest's clock.
func TestReplayCacheStatsNotEvictions(t *testing.T) {
	t.Parallel()
	t.Run("purge and close", func(t *testing.T) {
		t.Parallel()
		mem := memStore(t)
		watch := testkit.NewPurgeWatch(mem, mem)
		r := testkit.Serve(t, testkit.Config{Store: watch, Options: []idempotency.ServerOption{idempotency.WithReplayCache(2, 1<<20, time.Hour)}})
		watch.WaitSubscribed(t, 1)
		req := &testingv1.DoRequest{Payload: "charge"}
		for _, k := range []string{"k-a", "k-b", "k-c"} { // k-a is evicted
			if _, err := r.Client(t).Do(withKey(t.Context(), k), req); err != nil {
				t.Fatal(err)
			}
		}
		key := lastEvent(t, r.Events).StoreKey // k-c's
		if _, err := mem.Purge(t.Context(), key, store.PurgeOptions{}); err != nil {
			t.Fatal(err)
		}
		watch.WaitHandled(t, key)
		if got := cacheStats(t, r.Idempotency); got.Entries != 1 || got.Evictions != 1 {
			t.Fatalf("after a purge: %+v, want 1 entry, the 1 eviction before it", got)
		}
		if err := r.Idempotency.Close(); err != nil {
			t.Fatal(err)
		}
		if got := cacheStats(t, r.Idempotency); got.Entries != 0 || got.Bytes != 0 || got.Evictions != 1 {
			t.Fatalf("after Close: %+v, want an empty cache, the 1 eviction before it", got)
		}
	})
	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			f := newFixtureOn(t, faultstore.New(memStore(t)), nil, idempotency.WithReplayCache(2, 1<<20, 10*time.Minute))
			req := &testingv1.DoRequest{Payload: "charge"}
			do := func(key string) {
				t.Helper()
				if _, err := f.Client.Do(withKey(t.Context(), key), req); err != nil {
					t.Fatal(err)
				}
			}
			do("k-a")
			do("k-b")
			time.Sleep(11 * time.Minute) // both expire, and stay until dropped
			if got := cacheStats(t, f.Idempotency); got.Entries != 2 {
				t.Fatalf("after the expiry: %+v, want the 2 expired entries still counted", got)
			}
			do("k-c") // replaces k-a, expired
			do("k-d") // replaces k-b, expired
			if got := cacheStats(t, f.Idempotency); got.Entries != 2 || got.Evictions != 0 {
				t.Fatalf("after 2 keys replaced 2 expired entries: %+v, want 2 entries, no eviction", got)
			}
			do("k-e") // evicts k-c, live
			if got := cacheStats(t, f.Idempotency); got.Entries != 2 || got.Evictions != 1 {
				t.Fatalf("after a live entry was evicted: %+v, want 2 entries, 1 eviction", got)
			}
		})
	})
}

// TestReplayCacheStatsWithoutCache: a server without a replay cache has
// no figures.
func TestReplayCacheStatsWithoutCache(t *testing.T) {
	t.Parallel()
	if st, ok := idempotency.NewServer(memStore(t)).ReplayCacheStats(); ok || st != (idempotency.ReplayCacheStats{}) {
		t.Fatalf("ReplayCacheStats() = %+v, %t; want zero, false", st, ok)
	}
}
