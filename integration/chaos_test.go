package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestChaosLeaseLostOnStalledLink: instance A's handler keeps running
// while A's link to Redis is stalled (by the fault proxy, not by a fake
// store) for longer than the lease. A's renewals cannot reach Redis, the
// claim expires there, and instance B claims the key and executes. When
// A's handler returns, its completion reaches Redis only after B's, is
// refused by the owner token and reported as DecisionLeaseLost; A's caller
// still gets A's answer, and every later call replays B's.
func TestChaosLeaseLostOnStalledLink(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rs := redistest.StartServer(t)
	direct := rs.Client()
	proxyA := chaosProxy(t, rs.Addr())

	const lease = 300 * time.Millisecond
	var execs atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	handler := func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		n := execs.Add(1)
		if n == 1 {
			close(started)
			<-release // keeps running, whatever its context says
		}
		return &testingv1.DoResponse{Payload: req.GetPayload(), Execution: n}, nil
	}
	opts := []idempotency.ServerOption{idempotency.WithLease(lease)}

	storeA := newSignalStore(redisstore.New(chaosRedis(t, proxyA.Addr(), true)))
	evA := &events{}
	a := testserver.New(t, &testserver.Service{Handler: handler}, grpc.ChainUnaryInterceptor(
		idempotency.UnaryServerInterceptor(storeA, append(opts, idempotency.WithObserver(evA))...)))
	b := testserver.New(t, &testserver.Service{Handler: handler}, grpc.ChainUnaryInterceptor(
		idempotency.UnaryServerInterceptor(redisstore.New(rs.Client()), opts...)))
	clientA, clientB := a.Client(t), b.Client(t)

	req := &testingv1.DoRequest{Payload: "transfer"}
	key := withKey(ctx, "k-stalled")
	type answer struct {
		resp *testingv1.DoResponse
		err  error
	}
	firstDone := make(chan answer, 1)
	go func() {
		resp, err := clientA.Do(key, req)
		firstDone <- answer{resp, err}
	}()
	<-started
	proxyA.Stall()
	// A's renewals are held by the proxy; the claim expires in Redis.
	waitFor(t, func() bool { return len(redisKeys(ctx, t, direct, "")) == 0 })

	second, err := callUntilNotInUse(ctx, 20*time.Millisecond, func() (*testingv1.DoResponse, error) {
		return clientB.Do(key, req)
	})
	if err != nil || second.GetExecution() != 2 {
		t.Fatalf("instance B: %v, %v; want it to take the key over and execute (execution 2)", second, err)
	}

	close(release)
	<-storeA.completing // A's completion is on its way, held by the stall
	proxyA.Resume()
	first := <-firstDone
	if first.err != nil || first.resp.GetExecution() != 1 {
		t.Fatalf("instance A answered %v, %v; want its own execution 1", first.resp, first.err)
	}
	if err := storeA.lastCompleteErr(); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("A's completion returned %v, want store.ErrLeaseLost (refused by the owner token)", err)
	}
	if n := evA.Count(idempotency.DecisionLeaseLost); n != 1 {
		t.Fatalf("A's observer saw %d lease_lost, want 1", n)
	}
	if n := evA.Count(idempotency.DecisionExecuted); n != 0 {
		t.Fatalf("A's observer saw %d executed, want 0", n)
	}
	for name, c := range map[string]testingv1.TestServiceClient{"A": clientA, "B": clientB} {
		got, err := c.Do(key, req)
		if err != nil || got.GetExecution() != 2 {
			t.Fatalf("later call on %s: %v, %v; want the replay of B's execution 2", name, got, err)
		}
	}
	if n := execs.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (A, then B after A's lease was lost)", n)
	}
}

// TestChaosStoreSlowerThanDeadline: Redis answers (through the proxy's
// latency) only after the caller's deadline has passed. The handler never
// runs, and the caller gets DEADLINE_EXCEEDED. With ContextTimeoutEnabled
// go-redis gives up at the deadline; the claim, already on the wire, lands
// afterwards with no owner and blocks the key until its lease ends.
// Without it go-redis waits for the reply, the interceptor sees it won the
// claim after the deadline and releases it, so the key is free at once.
func TestChaosStoreSlowerThanDeadline(t *testing.T) {
	t.Parallel()
	for _, contextTimeout := range []bool{true, false} {
		name := "ContextTimeoutEnabled=false"
		if contextTimeout {
			name = "ContextTimeoutEnabled=true"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			rs := redistest.StartServer(t)
			direct := rs.Client()
			proxy := chaosProxy(t, rs.Addr())
			st := redisstore.New(chaosRedis(t, proxy.Addr(), contextTimeout))
			if err := st.LoadScripts(ctx); err != nil {
				t.Fatal(err)
			}
			const lease = 500 * time.Millisecond
			ev := &events{}
			results := make(serverResults, 1000)
			srv := testserver.New(t, &testserver.Service{}, grpc.ChainUnaryInterceptor(results.intercept,
				idempotency.UnaryServerInterceptor(st, idempotency.WithLease(lease), idempotency.WithObserver(ev))))
			client := srv.Client(t)

			proxy.SetLatency(400 * time.Millisecond)                                             // a round trip takes 800ms
			callCtx, cancel := context.WithTimeout(withKey(ctx, "k-slow"), 300*time.Millisecond) // long enough to reach the server on a loaded machine
			_, err := client.Do(callCtx, &testingv1.DoRequest{Payload: "p"})
			cancel()
			if c := status.Code(err); c != codes.DeadlineExceeded && c != codes.Unavailable {
				t.Fatalf("client got %v, want DEADLINE_EXCEEDED or UNAVAILABLE", err)
			}
			var serverErr error
			select {
			case serverErr = <-results: // the interceptor has finished
			case <-time.After(30 * time.Second):
				t.Fatal("the call never reached the interceptor (a machine too loaded to start it within the caller's 300ms)")
			}
			// The client's RST_STREAM may cancel the server's context
			// before the server's own deadline timer fires.
			if c := status.Code(serverErr); c != codes.DeadlineExceeded && c != codes.Canceled {
				t.Fatalf("interceptor returned %v, want DEADLINE_EXCEEDED or CANCELED", serverErr)
			}
			if n := srv.Service.Executions(); n != 0 {
				t.Fatalf("handler ran %d times, want 0: the caller was gone before the claim", n)
			}

			if contextTimeout {
				// The claim sent before the deadline lands with no owner.
				waitFor(t, func() bool { return len(redisKeys(ctx, t, direct, "")) == 1 })
			} else {
				if n := ev.Count(idempotency.DecisionReleased); n != 1 {
					t.Fatalf("observer saw %d released, want 1: a claim won after the deadline is released", n)
				}
				if keys := redisKeys(ctx, t, direct, ""); len(keys) != 0 {
					t.Fatalf("Redis holds %q after the release, want nothing", keys)
				}
			}
			proxy.SetLatency(0)
			resp, err := callUntilNotInUse(ctx, 20*time.Millisecond, func() (*testingv1.DoResponse, error) {
				return client.Do(withKey(ctx, "k-slow"), &testingv1.DoRequest{Payload: "p"})
			})
			if err != nil || resp.GetExecution() != 1 {
				t.Fatalf("retry once Redis is fast: %v, %v; want one execution", resp, err)
			}
			if n := srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}
