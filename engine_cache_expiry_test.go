package idempotency_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

// TestReplayCacheExpiry: a cached entry expires at the record's
// completion plus the method's retention, or the cache's ttl after it was
// filled, whichever comes first. The test runs on synctest's clock: the
// servers and the memory store live in the bubble.
func TestReplayCacheExpiry(t *testing.T) {
	t.Parallel()
	const retention = time.Hour
	cases := []struct {
		name string
		ttl  time.Duration
		// fillAt is when the cached server first replays the key, filling
		// its cache; 0: it ran the call itself.
		fillAt time.Duration
		// expiresAt is when its entry expires; rerun: the store's
		// retention has ended then too, so the handler runs again.
		expiresAt time.Duration
		rerun     bool
	}{
		{name: "ttl first", ttl: 10 * time.Minute, expiresAt: 10 * time.Minute},
		{name: "ttl first, filled from the store", ttl: 10 * time.Minute, fillAt: 30 * time.Minute, expiresAt: 40 * time.Minute},
		{name: "retention first", ttl: 3 * time.Hour, expiresAt: retention, rerun: true},
		// Filled 50 minutes after completion: the entry ends with the
		// record's retention, not 1h after the fill.
		{name: "retention first, filled from the store", ttl: 3 * time.Hour, fillAt: 50 * time.Minute, expiresAt: retention, rerun: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				fs := faultstore.New(memStore(t))
				cached := newFixtureOn(t, fs, nil, idempotency.WithRetention(retention), idempotency.WithReplayCache(100, 1<<20, tc.ttl))
				first := cached
				if tc.fillAt > 0 {
					first = newFixtureOn(t, fs, nil, idempotency.WithRetention(retention))
				}
				req := &testingv1.DoRequest{Payload: "charge"}
				ctx := withKey(t.Context(), "k-expiry")
				if _, err := first.client.Do(ctx, req); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				if tc.fillAt > 0 {
					time.Sleep(tc.fillAt)
					if _, err := cached.client.Do(ctx, req); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(time.Until(start.Add(tc.expiresAt - time.Second)))
				cached.wantCached(t, "k-expiry", req)

				time.Sleep(time.Until(start.Add(tc.expiresAt + time.Second)))
				before := fs.Count("claim")
				resp, err := cached.client.Do(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if fs.Count("claim") != before+1 {
					t.Fatalf("at %v the entry was still cached; want it expired at %v", time.Since(start), tc.expiresAt)
				}
				executions := cached.srv.Service.Executions()
				if first != cached {
					executions += first.srv.Service.Executions()
				}
				if ran := executions == 2; ran != tc.rerun || resp.GetPayload() != "charge" {
					t.Fatalf("after expiry: %v, %d executions; want the handler run again: %t", resp, executions, tc.rerun)
				}
			})
		})
	}
}

// TestReplayCacheConcurrent runs many callers on a hot key and on keys
// that churn a small cache, through two servers with caches of their own
// over one store (under -race in CI): every key runs once, every caller
// gets its key's answer, and each server then replays the hot key from
// its cache.
func TestReplayCacheConcurrent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ran := map[string]int{}
	count := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		mu.Lock()
		ran[req.GetPayload()]++
		mu.Unlock()
		return testserver.Echo(ctx, m, req)
	}
	fs := faultstore.New(memStore(t))
	opts := []idempotency.ServerOption{idempotency.WithReplayCache(3, 1<<20, time.Hour), idempotency.WithWaitForInFlight(time.Minute)}
	servers := []*fixture{newFixtureOn(t, fs, count, opts...), newFixtureOn(t, fs, count, opts...)}

	const callers, calls = 8, 25
	var wg sync.WaitGroup
	var failures atomic.Int64
	for i := range 2 * callers {
		f := servers[i%2]
		wg.Go(func() {
			for j := range calls {
				key := "hot"
				if j%3 == 0 {
					key = "cold-" + strconv.Itoa((i+j)%6)
				}
				resp, err := f.client.Do(withKey(t.Context(), key), &testingv1.DoRequest{Payload: key})
				if err != nil || resp.GetPayload() != key {
					t.Errorf("call of %s: %v, %v", key, resp, err)
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failures.Load() > 0 {
		return
	}
	mu.Lock()
	for key, n := range ran {
		if n != 1 {
			t.Errorf("%s ran %d times, want once", key, n)
		}
	}
	mu.Unlock()
	for _, f := range servers {
		// The churn may have evicted it: the first call refills it.
		if _, err := f.client.Do(withKey(t.Context(), "hot"), &testingv1.DoRequest{Payload: "hot"}); err != nil {
			t.Fatal(err)
		}
		f.wantCached(t, "hot", &testingv1.DoRequest{Payload: "hot"})
	}
}
