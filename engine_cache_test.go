package idempotency_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// cacheOpt is a replay cache large enough for every test that does not
// test its bounds.
var cacheOpt = idempotency.WithReplayCache(1000, 1<<20, time.Hour)

// storeCalls returns how many calls the fixture's store has had.
func storeCalls(f *fixture) int { return len(f.Faults.Calls()) }

// wantCached fails the test unless a call with key and req replays its
// payload with the replay marker and no store call, told to the observer
// as a replayed event with Cached; it returns the response.
func wantCached(t *testing.T, f *fixture, key string, req *testingv1.DoRequest) *testingv1.DoResponse {
	t.Helper()
	before, cachedBefore := storeCalls(f), cachedReplays(f)
	var hdr metadata.MD
	resp, err := f.Client.Do(withKey(t.Context(), key), req, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetPayload() != req.GetPayload() || !idempotency.Replayed(hdr, nil) {
		t.Fatalf("got %v (header %v); want %q replayed", resp, hdr, req.GetPayload())
	}
	if calls := f.Faults.Calls()[before:]; len(calls) != 0 {
		t.Fatalf("a cached replay made store calls %v", calls)
	}
	if cachedReplays(f) != cachedBefore+1 {
		t.Fatal("the observer was not told of a replayed event with Cached")
	}
	return resp
}

// cachedReplays counts the replayed events answered from the cache.
func cachedReplays(f *fixture) int {
	n := 0
	for _, e := range f.Events.All() {
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
	if _, err := f.Client.Do(withKey(t.Context(), "k-hot"), req); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if resp := wantCached(t, f, "k-hot", req); resp.GetExecution() != 1 {
			t.Fatalf("cached replay of execution %d, want 1", resp.GetExecution())
		}
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	for _, e := range f.Events.All() {
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
	g := newFixtureOn(t, f.Faults, nil, cacheOpt)
	req := &testingv1.DoRequest{Payload: "charge"}
	if _, err := f.Client.Do(withKey(t.Context(), "k-fill"), req); err != nil {
		t.Fatal(err)
	}
	before := f.Faults.Count("claim")
	if _, err := g.Client.Do(withKey(t.Context(), "k-fill"), req); err != nil {
		t.Fatal(err)
	}
	if n := f.Faults.Count("claim") - before; n != 1 {
		t.Fatalf("first replay on the cached server made %d claims, want 1", n)
	}
	wantCached(t, g, "k-fill", req)
}

func TestReplayCacheKeyReused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, cacheOpt)
	ctx := withKey(t.Context(), "k-reused")
	if _, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "a"}); err != nil {
		t.Fatal(err)
	}
	before := storeCalls(f)
	_, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "b"})
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason)
	if storeCalls(f) != before {
		t.Fatalf("a reused key on a cached key made store calls %v", f.Faults.Calls()[before:])
	}
	if f.Events.Count(idempotency.DecisionKeyReused) != 1 {
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
		_, err := f.Client.Do(ctx, req)
		done <- err
	}()
	<-started
	for range 2 {
		before := f.Faults.Count("claim")
		_, err := f.Client.Do(ctx, req)
		wantReason(t, err, codes.Aborted, idempotency.ErrKeyInUse.Reason)
		if f.Faults.Count("claim") != before+1 {
			t.Fatal("a duplicate of an in-flight key did not ask the store")
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantCached(t, f, "k-inflight", req)
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
	if _, err := f.Client.Do(ctx, req); err == nil {
		t.Fatal("first call succeeded; want its retryable error")
	}
	before := f.Faults.Count("claim")
	resp, err := f.Client.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetExecution() != 2 || f.Faults.Count("claim") != before+1 {
		t.Fatalf("retry after a release: %v after %d claims; want the handler run again after a store claim", resp, f.Faults.Count("claim")-before)
	}
}

// TestReplayCacheSkipsLostLease: an outcome the store refused to keep (the
// claim was gone when it completed) is not cached.
func TestReplayCacheSkipsLostLease(t *testing.T) {
	t.Parallel()
	var f *fixture
	f = newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if c, _ := idempotency.ClaimFromContext(ctx); f.Service.Executions() == 1 {
			// Evicted under the handler, as a full Redis would.
			if err := f.Faults.Store.Release(context.Background(), c.StoreKey, c.Token); err != nil {
				return nil, err
			}
		}
		return testserver.Echo(ctx, m, req)
	}, cacheOpt)
	ctx := withKey(t.Context(), "k-lost")
	req := &testingv1.DoRequest{Payload: "x"}
	if _, err := f.Client.Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	if f.Events.Count(idempotency.DecisionLeaseLost) != 1 {
		t.Fatal("the completion was not refused: the test proves nothing")
	}
	resp, err := f.Client.Do(ctx, req)
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
	client, mem, s := f.Client, f.Faults, f.Idempotency
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
				if _, err := f.Client.Do(withKey(t.Context(), k), req); err != nil {
					t.Fatal(err)
				}
			}
			wantCached(t, f, "k-c", req)
			wantCached(t, f, "k-b", req) // k-c is now the least recently used
			before := f.Faults.Count("claim")
			if _, err := f.Client.Do(withKey(t.Context(), "k-a"), req); err != nil { // evicts k-c
				t.Fatal(err)
			}
			if f.Faults.Count("claim") != before+1 {
				t.Fatal("an evicted key replayed without a store call")
			}
			wantCached(t, f, "k-a", req)
			wantCached(t, f, "k-b", req)
			before = f.Faults.Count("claim")
			if _, err := f.Client.Do(withKey(t.Context(), "k-c"), req); err != nil {
				t.Fatal(err)
			}
			if f.Faults.Count("claim") != before+1 {
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
		before := f.Faults.Count("claim")
		if _, err := f.Client.Do(withKey(t.Context(), "k-large"), req); err != nil {
			t.Fatal(err)
		}
		if f.Faults.Count("claim") != before+1 {
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
				if _, err := first.Client.Do(ctx, req); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				if tc.fillAt > 0 {
					time.Sleep(tc.fillAt)
					if _, err := cached.Client.Do(ctx, req); err != nil {
						t.Fatal(err)
					}
				}
				time.Sleep(time.Until(start.Add(tc.expiresAt - time.Second)))
				wantCached(t, cached, "k-expiry", req)

				time.Sleep(time.Until(start.Add(tc.expiresAt + time.Second)))
				before := fs.Count("claim")
				resp, err := cached.Client.Do(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if fs.Count("claim") != before+1 {
					t.Fatalf("at %v the entry was still cached; want it expired at %v", time.Since(start), tc.expiresAt)
				}
				executions := cached.Service.Executions()
				if first != cached {
					executions += first.Service.Executions()
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
// over one store (under -race in CI), while their figures are read
// (ReplayCacheStats, never past the bounds): every key runs once, every
// caller gets its key's answer, and each server then replays the hot key
// from its cache.
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
				resp, err := f.Client.Do(withKey(t.Context(), key), &testingv1.DoRequest{Payload: key})
				if err != nil || resp.GetPayload() != key {
					t.Errorf("call of %s: %v, %v", key, resp, err)
					failures.Add(1)
				}
			}
		})
	}
	done := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		for {
			for _, f := range servers {
				if st, _ := f.Idempotency.ReplayCacheStats(); st.Entries > st.MaxEntries || st.Bytes > st.MaxBytes {
					t.Errorf("ReplayCacheStats() = %+v, past its bounds", st)
				}
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	wg.Wait()
	close(done)
	reader.Wait()
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
		if _, err := f.Client.Do(withKey(t.Context(), "hot"), &testingv1.DoRequest{Payload: "hot"}); err != nil {
			t.Fatal(err)
		}
		wantCached(t, f, "hot", &testingv1.DoRequest{Payload: "hot"})
	}
}

// lastEvent returns the last event recorded.
func lastEvent(t *testing.T, ev *events) idempotency.Event {
	t.Helper()
	all := ev.All()
	if len(all) == 0 {
		t.Fatal("no event")
	}
	return all[len(all)-1]
}

// TestReplayCachePurgedKeyStopsReplaying: two servers over one memory
// store; A replays a key from its cache, the key is purged from the store
// (as an operator or another server purges it), and once A has been told,
// its next call with the key finds it free and runs the handler again
// instead of replaying the purged outcome from its cache.
func TestReplayCachePurgedKeyStopsReplaying(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	watch := testkit.NewPurgeWatch(mem, mem)
	a := testkit.Serve(t, testkit.Config{Store: watch, Options: []idempotency.ServerOption{cacheOpt}})
	b := testkit.Serve(t, testkit.Config{Store: mem, Options: []idempotency.ServerOption{cacheOpt}})
	watch.WaitSubscribed(t, 1)

	ctx := withKey(t.Context(), "k-purged")
	req := &testingv1.DoRequest{Payload: "charge"}
	for range 2 {
		if _, err := a.Client(t).Do(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if e := lastEvent(t, a.Events); e.Decision != idempotency.DecisionReplayed || !e.Cached {
		t.Fatalf("second call on A: %+v; want a replay from its cache", e)
	}
	if _, err := b.Client(t).Do(ctx, req); err != nil { // B caches it too
		t.Fatal(err)
	}
	key := lastEvent(t, a.Events).StoreKey
	if _, err := mem.Purge(t.Context(), key, store.PurgeOptions{}); err != nil {
		t.Fatal(err)
	}
	watch.WaitHandled(t, key)

	resp, err := a.Client(t).Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if e := lastEvent(t, a.Events); e.Decision != idempotency.DecisionExecuted || resp.GetExecution() != 2 {
		t.Fatalf("call on A after the purge: %+v, execution %d; want the handler run again", e, resp.GetExecution())
	}
}

// claimHook runs after each claim that finds a completed entry, before
// the server sees it.
type claimHook struct {
	store.Store
	after func(key string)
}

func (h *claimHook) Claim(ctx context.Context, key string, fp []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	c, err := h.Store.Claim(ctx, key, fp, lease, opts)
	if err == nil && !c.Won() && c.Existing.State == store.StateCompleted && h.after != nil {
		h.after(key)
	}
	return c, err
}

// TestReplayCacheFillRacingPurge: a record read from the store before a
// purge that the server hears of before it fills its cache is replayed to
// that call (it was the answer when the call read it) but not cached, so
// the next call finds the key free.
func TestReplayCacheFillRacingPurge(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	hook := &claimHook{Store: mem}
	watch := testkit.NewPurgeWatch(hook, mem)
	a := testkit.Serve(t, testkit.Config{Store: watch, Options: []idempotency.ServerOption{cacheOpt}})
	b := testkit.Serve(t, testkit.Config{Store: mem})
	watch.WaitSubscribed(t, 1)

	ctx := withKey(t.Context(), "k-race")
	req := &testingv1.DoRequest{Payload: "charge"}
	if _, err := b.Client(t).Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	hook.after = func(key string) { // once: A's first claim
		hook.after = nil
		if _, err := mem.Purge(context.Background(), key, store.PurgeOptions{}); err != nil {
			t.Error(err)
		}
		watch.WaitHandled(t, key)
	}
	if resp, err := a.Client(t).Do(ctx, req); err != nil || resp.GetExecution() != 1 {
		t.Fatalf("A's first call = %v, %v; want the replay of execution 1 it read", resp, err)
	}
	if _, err := a.Client(t).Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	if e := lastEvent(t, a.Events); e.Decision != idempotency.DecisionExecuted || a.Service.Executions() != 1 {
		t.Fatalf("A's second call: %+v, A's handler ran %d times; want it run once, not a cached replay", e, a.Service.Executions())
	}
}

// TestReplayCacheSubscription runs on synctest's clock: a subscription
// the store refuses is asked for again, 100 ms later and then twice as
// long each time, and the cache is emptied once one is made (purges made
// before it were not told); a store that cannot tell purges
// (errors.ErrUnsupported) is not asked again; Close ends the subscription
// and empties the cache for good.
func TestReplayCacheSubscription(t *testing.T) {
	t.Parallel()
	errDown := faultstore.ErrDown
	tests := []struct {
		name     string
		refuse   int
		err      error
		attempts []int // Invalidations calls at 0, 100 ms, 300 ms and 10 min
		cleared  bool  // a subscription made after the cache was filled emptied it
	}{
		{"subscribed at once", 0, nil, []int{1, 1, 1, 1}, false},
		{"refused twice", 2, errDown, []int{1, 2, 3, 3}, true},
		{"unsupported", 1, errors.ErrUnsupported, []int{1, 1, 1, 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				mem := memorystore.New()
				defer mem.Close()
				watch := testkit.NewPurgeWatch(mem, mem)
				watch.Refuse(tt.refuse, tt.err)
				ev := &events{}
				srv := idempotency.NewServer(watch, idempotency.WithObserver(ev), idempotency.WithReplayCache(10, 1<<20, time.Hour))
				defer srv.Close()
				once := func() idempotency.Event {
					_, err := idempotency.Once(t.Context(), srv, "op", "k", wrapperspb.Int64(1), func(context.Context) error { return nil })
					if err != nil {
						t.Fatal(err)
					}
					return lastEvent(t, ev)
				}
				synctest.Wait()
				once()
				if e := once(); !e.Cached {
					t.Fatalf("second call: %+v; want a replay from the cache", e)
				}
				for i, at := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 10 * time.Minute} {
					time.Sleep(at - time.Since(start))
					synctest.Wait()
					if got := watch.Attempts(); got != tt.attempts[i] {
						t.Fatalf("%v after start: %d subscriptions asked for, want %d", at, got, tt.attempts[i])
					}
				}
				if e := once(); e.Cached == tt.cleared {
					t.Fatalf("after the subscriptions: %+v; want cached %v", e, !tt.cleared)
				}
				if err := srv.Close(); err != nil {
					t.Fatal(err)
				}
				if e := once(); e.Cached {
					t.Fatalf("after Close: %+v; want no cached replay", e)
				}
				if e := once(); e.Cached {
					t.Fatalf("after Close, again: %+v; want no cached replay", e)
				}
			})
		})
	}
}

// TestReplayCacheSubscriptionEndsWithServer: a Server dropped without
// Close, whose interceptor is dropped too, ends its subscription once the
// garbage collector has reclaimed it.
func TestReplayCacheSubscriptionEndsWithServer(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	watch := testkit.NewPurgeWatch(mem, mem)
	func() {
		srv := idempotency.NewServer(watch, cacheOpt)
		_ = srv.UnaryServerInterceptor()
	}()
	watch.WaitSubscribed(t, 1)
	waitFor(t, func() bool {
		runtime.GC()
		return watch.Ended() == 1
	})
}
