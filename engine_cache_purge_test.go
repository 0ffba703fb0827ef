package idempotency_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testkit"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

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

func (h *claimHook) Claim(ctx context.Context, key string, fp []byte, lease time.Duration) (store.ClaimResult, error) {
	c, err := h.Store.Claim(ctx, key, fp, lease)
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
