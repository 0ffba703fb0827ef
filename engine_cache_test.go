package idempotency_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

// cacheOpt is a replay cache large enough for every test that does not
// test its bounds.
var cacheOpt = idempotency.WithReplayCache(1000, 1<<20, time.Hour)

// storeCalls returns how many calls the fixture's store has had.
func (f *fixture) storeCalls() int { return len(f.store.Calls()) }

// wantCached fails the test unless a call with key and req replays its
// payload with the replay marker and no store call, told to the observer
// as a replayed event with Cached; it returns the response.
func (f *fixture) wantCached(t *testing.T, key string, req *testingv1.DoRequest) *testingv1.DoResponse {
	t.Helper()
	before, cachedBefore := f.storeCalls(), f.cachedReplays()
	var hdr metadata.MD
	resp, err := f.client.Do(withKey(t.Context(), key), req, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetPayload() != req.GetPayload() || !idempotency.Replayed(hdr, nil) {
		t.Fatalf("got %v (header %v); want %q replayed", resp, hdr, req.GetPayload())
	}
	if calls := f.store.Calls()[before:]; len(calls) != 0 {
		t.Fatalf("a cached replay made store calls %v", calls)
	}
	if f.cachedReplays() != cachedBefore+1 {
		t.Fatal("the observer was not told of a replayed event with Cached")
	}
	return resp
}

// cachedReplays counts the replayed events answered from the cache.
func (f *fixture) cachedReplays() int {
	n := 0
	for _, e := range f.events.All() {
		if e.Decision == idempotency.DecisionReplayed && e.Cached {
			n++
		}
	}
	return n
}

func TestReplayCacheHitMakesNoStoreCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, cacheOpt)
	req := &testingv1.DoRequest{Payload: "charge", Amount: 42}
	if _, err := f.client.Do(withKey(t.Context(), "k-hot"), req); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if resp := f.wantCached(t, "k-hot", req); resp.GetExecution() != 1 {
			t.Fatalf("cached replay of execution %d, want 1", resp.GetExecution())
		}
	}
	if n := f.srv.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	for _, e := range f.events.All() {
		if e.Cached && e.StoreTime != 0 {
			t.Fatalf("cached replay reports store time %v", e.StoreTime)
		}
	}
}

// TestReplayCacheFilledFromStore: a server whose cache does not hold a key
// replays it from the store once, and from its cache after that.
func TestReplayCacheFilledFromStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil) // no cache: it writes the record
	g := newFixtureOn(t, f.store, nil, cacheOpt)
	req := &testingv1.DoRequest{Payload: "charge"}
	if _, err := f.client.Do(withKey(t.Context(), "k-fill"), req); err != nil {
		t.Fatal(err)
	}
	before := f.store.Count("claim")
	if _, err := g.client.Do(withKey(t.Context(), "k-fill"), req); err != nil {
		t.Fatal(err)
	}
	if n := f.store.Count("claim") - before; n != 1 {
		t.Fatalf("first replay on the cached server made %d claims, want 1", n)
	}
	g.wantCached(t, "k-fill", req)
}

func TestReplayCacheKeyReused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, cacheOpt)
	ctx := withKey(t.Context(), "k-reused")
	if _, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "a"}); err != nil {
		t.Fatal(err)
	}
	before := f.storeCalls()
	_, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "b"})
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason)
	if f.storeCalls() != before {
		t.Fatalf("a reused key on a cached key made store calls %v", f.store.Calls()[before:])
	}
	if f.events.Count(idempotency.DecisionKeyReused) != 1 {
		t.Fatal("observer not told of the reused key")
	}
}

// TestReplayCacheSkipsInFlight: a duplicate while the original runs finds
// the key in flight in the store, and the in-flight key is not cached.
func TestReplayCacheSkipsInFlight(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	f := newFixture(t, blockingHandler(started, release), cacheOpt)
	ctx := withKey(t.Context(), "k-inflight")
	req := &testingv1.DoRequest{Payload: "x"}
	done := make(chan error, 1)
	go func() {
		_, err := f.client.Do(ctx, req)
		done <- err
	}()
	<-started
	for range 2 {
		before := f.store.Count("claim")
		_, err := f.client.Do(ctx, req)
		wantReason(t, err, codes.Aborted, idempotency.ErrKeyInUse.Reason)
		if f.store.Count("claim") != before+1 {
			t.Fatal("a duplicate of an in-flight key did not ask the store")
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.wantCached(t, "k-inflight", req)
}

// TestReplayCacheSkipsReleased: a key released after a retryable error is
// not cached: the retry claims it in the store and runs the handler.
func TestReplayCacheSkipsReleased(t *testing.T) {
	t.Parallel()
	var failed atomic.Bool
	f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if !failed.Swap(true) {
			return nil, statusError(codes.Unavailable, "try again")
		}
		return testserver.Echo(ctx, m, req)
	}, cacheOpt)
	ctx := withKey(t.Context(), "k-released")
	req := &testingv1.DoRequest{Payload: "x"}
	if _, err := f.client.Do(ctx, req); err == nil {
		t.Fatal("first call succeeded; want its retryable error")
	}
	before := f.store.Count("claim")
	resp, err := f.client.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetExecution() != 2 || f.store.Count("claim") != before+1 {
		t.Fatalf("retry after a release: %v after %d claims; want the handler run again after a store claim", resp, f.store.Count("claim")-before)
	}
}

// TestReplayCacheSkipsLostLease: an outcome the store refused to keep (the
// claim was gone when it completed) is not cached.
func TestReplayCacheSkipsLostLease(t *testing.T) {
	t.Parallel()
	var f *fixture
	f = newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if c, _ := idempotency.ClaimFromContext(ctx); f.srv.Service.Executions() == 1 {
			// Evicted under the handler, as a full Redis would.
			if err := f.store.Store.Release(context.Background(), c.StoreKey, c.Token); err != nil {
				return nil, err
			}
		}
		return testserver.Echo(ctx, m, req)
	}, cacheOpt)
	ctx := withKey(t.Context(), "k-lost")
	req := &testingv1.DoRequest{Payload: "x"}
	if _, err := f.client.Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	if f.events.Count(idempotency.DecisionLeaseLost) != 1 {
		t.Fatal("the completion was not refused: the test proves nothing")
	}
	resp, err := f.client.Do(ctx, req)
	if err != nil || resp.GetExecution() != 2 {
		t.Fatalf("retry after a lost lease: %v, %v; want the handler run again", resp, err)
	}
}

// TestReplayCacheSharedByEntryPoints: an outcome the interceptor stored
// replays through Do from the cache (the method's namespace is Do's
// operation).
func TestReplayCacheSharedByEntryPoints(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, cacheOpt, idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{Namespace: "shop.charge"}))
	client, mem, s := f.client, f.store, f.server
	req := &testingv1.DoRequest{Payload: "charge"}
	if _, err := client.Do(withKey(t.Context(), "k-shared"), req); err != nil {
		t.Fatal(err)
	}
	before := len(mem.Calls())
	resp, replayed, err := idempotency.Do(t.Context(), s, "shop.charge", "k-shared", req, func(context.Context) (*testingv1.DoResponse, error) {
		t.Error("Do ran its function for a cached key")
		return nil, nil
	})
	if err != nil || !replayed || resp.GetExecution() != 1 {
		t.Fatalf("Do = %v, %t, %v; want the interceptor's outcome replayed", resp, replayed, err)
	}
	if calls := mem.Calls()[before:]; len(calls) != 0 {
		t.Fatalf("Do's replay of a cached key made store calls %v", calls)
	}
}

func TestReplayCacheBounds(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 4000)
	cases := []struct {
		name    string
		opt     idempotency.ServerOption
		payload string
	}{
		// Two entries, by count or by bytes (a record of ~4 KB, and
		// 192-byte overhead, fit twice in 10 KB and not three times).
		{"entries", idempotency.WithReplayCache(2, 1<<20, time.Hour), "small"},
		{"bytes", idempotency.WithReplayCache(1000, 10_000, time.Hour), big},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil, tc.opt)
			req := &testingv1.DoRequest{Payload: tc.payload}
			for _, k := range []string{"k-a", "k-b", "k-c"} { // k-a is evicted
				if _, err := f.client.Do(withKey(t.Context(), k), req); err != nil {
					t.Fatal(err)
				}
			}
			f.wantCached(t, "k-c", req)
			f.wantCached(t, "k-b", req) // k-c is now the least recently used
			before := f.store.Count("claim")
			if _, err := f.client.Do(withKey(t.Context(), "k-a"), req); err != nil { // evicts k-c
				t.Fatal(err)
			}
			if f.store.Count("claim") != before+1 {
				t.Fatal("an evicted key replayed without a store call")
			}
			f.wantCached(t, "k-a", req)
			f.wantCached(t, "k-b", req)
			before = f.store.Count("claim")
			if _, err := f.client.Do(withKey(t.Context(), "k-c"), req); err != nil {
				t.Fatal(err)
			}
			if f.store.Count("claim") != before+1 {
				t.Fatal("the least recently used key was not the one evicted")
			}
		})
	}
}

// TestReplayCacheLargerThanBound: a record larger than maxBytes is not
// cached at all.
func TestReplayCacheLargerThanBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithReplayCache(1000, 1000, time.Hour))
	req := &testingv1.DoRequest{Payload: strings.Repeat("x", 2000)}
	for range 3 {
		before := f.store.Count("claim")
		if _, err := f.client.Do(withKey(t.Context(), "k-large"), req); err != nil {
			t.Fatal(err)
		}
		if f.store.Count("claim") != before+1 {
			t.Fatal("a record larger than the cache's bytes was replayed from the cache")
		}
	}
}

func TestReplayCacheConfigPanics(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]idempotency.ServerOption{
		"maxEntries": idempotency.WithReplayCache(0, 1, time.Second),
		"maxBytes":   idempotency.WithReplayCache(1, -1, time.Second),
		"ttl":        idempotency.WithReplayCache(1, 1, 0),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				msg, _ := recover().(error)
				if msg == nil || !strings.Contains(msg.Error(), "idempotency: WithReplayCache: "+name) {
					t.Fatalf("panic %v; want one naming WithReplayCache and %s", msg, name)
				}
			}()
			idempotency.NewServer(memStore(t), opt)
		})
	}
}
