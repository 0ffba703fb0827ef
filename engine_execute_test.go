package idempotency_test

import (
	"context"
	"errors"
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
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// chargeThenBookkeep charges once per execution and then spends d on
// bookkeeping that honours its context, as a careful handler does.
func chargeThenBookkeep(charges *atomic.Int64, d time.Duration) testserver.HandlerFunc {
	return func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		charges.Add(1)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return testserver.Echo(ctx, m, req)
	}
}

// TestCallerGivingUpChargesOnce: a client whose attempts time out after
// 100ms, against a handler that charges and then spends 300ms on
// bookkeeping, charged 3 times for one logical call when the handler was
// cancelled with its caller. The claimed handler now runs to the end on a
// detached context; the client's retries see the key in use and then get
// the replay.
func TestCallerGivingUpChargesOnce(t *testing.T) {
	t.Parallel()
	var charges atomic.Int64
	rig := testkit.Start(t, testkit.Config{Handler: chargeThenBookkeep(&charges, 300*time.Millisecond),
		Options: []idempotency.ServerOption{idempotency.WithRetryAfter(50 * time.Millisecond)}})
	client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(
		idempotency.WithPerAttemptTimeout(100*time.Millisecond),
		idempotency.WithMaxAttempts(50),
		idempotency.WithBackoff(noBackoff),
	))
	resp, err := client.Do(t.Context(), &testingv1.DoRequest{Payload: "charge"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetPayload() != "charge" {
		t.Fatalf("response %v, want the charge's answer", resp)
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("%d charges for one logical call, want 1", n)
	}
	wantOneKey(t, rig.Attempts.All())
}

// TestDeadlineThenManualRetryChargesOnce: the same with a plain deadline
// and a retry by hand: 2 charges before, 1 now.
func TestDeadlineThenManualRetryChargesOnce(t *testing.T) {
	t.Parallel()
	var charges atomic.Int64
	f := newFixture(t, chargeThenBookkeep(&charges, 300*time.Millisecond),
		idempotency.WithWaitForInFlight(2*time.Second))
	ctx := withKey(t.Context(), "k-deadline")
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := f.Client.Do(short, &testingv1.DoRequest{Payload: "p"})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("first call: %v, want DEADLINE_EXCEEDED", err)
	}
	resp, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
	if err != nil || resp.GetPayload() != "p" {
		t.Fatalf("retry: %v %v, want the first execution's answer", resp, err)
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	if n := f.Events.Count(idempotency.DecisionReplayed); n != 1 {
		t.Fatalf("%d replays, want the retry replayed", n)
	}
}

// TestCallerCancellationOptOut: with WithCallerCancellation, server-wide or
// per method, the handler is cancelled with its caller, its error releases
// the claim, and a retry runs it again (for handlers whose work is atomic
// with their error).
func TestCallerCancellationOptOut(t *testing.T) {
	t.Parallel()
	cases := map[string][]idempotency.ServerOption{
		"server-wide": {idempotency.WithCallerCancellation()},
		"per method": {idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName,
			idempotency.MethodPolicy{Cancellation: idempotency.CancellationCaller})},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var charges atomic.Int64
			started := make(chan struct{})
			sawCancel := make(chan error, 1)
			f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				if charges.Add(1) == 1 {
					close(started)
					<-ctx.Done()
					sawCancel <- ctx.Err()
					return nil, status.FromContextError(ctx.Err()).Err()
				}
				return testserver.Echo(ctx, m, req)
			}, opts...)
			ctx := withKey(t.Context(), "k-optout")
			// The caller leaves once its handler runs (not on a timer, so a
			// loaded machine cannot make it leave before the claim).
			gone, leave := context.WithCancel(ctx)
			go func() { <-started; leave() }()
			if _, err := f.Client.Do(gone, &testingv1.DoRequest{}); status.Code(err) != codes.Canceled {
				t.Fatalf("first call: %v, want CANCELED", err)
			}
			if err := <-sawCancel; !errors.Is(err, context.Canceled) {
				t.Fatalf("handler context ended with %v, want its caller's cancellation", err)
			}
			f.Events.Wait(t, idempotency.DecisionReleased, 1)
			if _, err := f.Client.Do(ctx, &testingv1.DoRequest{}); err != nil {
				t.Fatal(err)
			}
			if n := charges.Load(); n != 2 {
				t.Fatalf("handler ran %d times, want 2 (released, then run again)", n)
			}
		})
	}
}

// TestHandlerTimeoutBoundsDetachedHandler: a detached handler whose caller
// has gone ends at the handler timeout, server-wide or per method, with
// ErrHandlerTimeout as its context's cause; its error releases the claim.
func TestHandlerTimeoutBoundsDetachedHandler(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	cases := map[string][]idempotency.ServerOption{
		"server-wide": {idempotency.WithHandlerTimeout(timeout)},
		"per method": {idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName,
			idempotency.MethodPolicy{HandlerTimeout: timeout})},
	}
	for name, opts := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			started := make(chan time.Time, 1)
			causes := make(chan error, 1)
			f := newFixture(t, func(ctx context.Context, _ string, _ *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				started <- time.Now()
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return nil, status.FromContextError(ctx.Err()).Err()
			}, opts...)
			// The caller leaves once its handler runs (not on a timer, so a
			// loaded machine cannot make it leave before the claim).
			ctx, leave := context.WithCancel(withKey(t.Context(), "k-timeout"))
			defer leave()
			go func() {
				_, _ = f.Client.Do(ctx, &testingv1.DoRequest{})
			}()
			start := <-started
			leave()
			var cause error
			select {
			case cause = <-causes:
			case <-time.After(10 * time.Second): // the default timeout is a minute
				t.Fatalf("the handler was still running 10s after its caller left, with a handler timeout of %v", timeout)
			}
			if !errors.Is(cause, idempotency.ErrHandlerTimeout) {
				t.Fatalf("handler context cause %v, want ErrHandlerTimeout", cause)
			}
			if took := time.Since(start); took < timeout {
				t.Fatalf("handler ended after %v, before the handler timeout", took)
			}
			f.Events.Wait(t, idempotency.DecisionReleased, 1)
		})
	}
}

// TestCancellationDetachedOverridesServer: a method whose policy says
// CancellationDetached keeps running after its caller leaves although the
// server cancels handlers with their callers, and a retry replays its
// outcome.
func TestCancellationDetachedOverridesServer(t *testing.T) {
	t.Parallel()
	var charges atomic.Int64
	started := make(chan struct{})
	f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if charges.Add(1) == 1 {
			close(started)
			// Long enough for a cancellation to arrive, were it passed on.
			select {
			case <-ctx.Done():
				return nil, status.FromContextError(ctx.Err()).Err()
			case <-time.After(300 * time.Millisecond):
			}
		}
		return testserver.Echo(ctx, m, req)
	}, idempotency.WithCallerCancellation(), idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName,
		idempotency.MethodPolicy{Cancellation: idempotency.CancellationDetached}))
	ctx := withKey(t.Context(), "k-detached")
	gone, leave := context.WithCancel(ctx)
	go func() { <-started; leave() }()
	if _, err := f.Client.Do(gone, &testingv1.DoRequest{Payload: "p"}); status.Code(err) != codes.Canceled {
		t.Fatalf("first call: %v, want CANCELED", err)
	}
	f.Events.Wait(t, idempotency.DecisionExecuted, 1)
	resp, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
	if err != nil || resp.GetPayload() != "p" {
		t.Fatalf("retry: %v, %v; want the stored response", resp, err)
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// TestHandlerKeepsLaterCallerDeadline: a caller deadline later than the
// handler timeout is kept.
func TestHandlerKeepsLaterCallerDeadline(t *testing.T) {
	t.Parallel()
	deadlines := make(chan time.Time, 1)
	f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		d, _ := ctx.Deadline()
		deadlines <- d
		return testserver.Echo(ctx, m, req)
	}, idempotency.WithHandlerTimeout(time.Second))
	want := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(withKey(t.Context(), "k-later"), want)
	defer cancel()
	if _, err := f.Client.Do(ctx, &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := <-deadlines; got.Before(want.Add(-time.Minute)) {
		t.Fatalf("handler deadline %v, want the caller's %v", got, want)
	}
}

// The shutdown tests run in a synctest bubble: synctest.Wait returns once
// every other goroutine of the bubble (the gRPC servers, the client, the
// blocked handler, the stop) is blocked, so "Stop has not returned" is
// checked when nothing can move any more, not after a guessed delay, and
// the lease runs out on the bubble's clock.

// shutdownRig is two servers over one memory store, as two replicas of a
// service behind a load balancer. A's handler blocks until released; B's
// answers at once. A reaches the store through a fault store, so that a
// test can take A away from it as a process that exits would be.
type shutdownRig struct {
	a, b             *testserver.Server
	clientA, clientB testingv1.TestServiceClient
	storeA           *faultstore.Store
	started, release chan struct{}
	releaseOnce      sync.Once
	executed         chan struct{} // A stored an outcome
}

const shutdownLease = 3 * time.Second

func newShutdownRig(t *testing.T, serverOpts ...grpc.ServerOption) *shutdownRig {
	t.Helper()
	mem := memStore(t)
	r := &shutdownRig{
		storeA:   faultstore.New(mem),
		started:  make(chan struct{}),
		release:  make(chan struct{}),
		executed: make(chan struct{}, 1),
	}
	blocked := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		close(r.started)
		<-r.release
		return testserver.Echo(ctx, m, req)
	}
	observer := idempotency.ObserverFunc(func(_ context.Context, e idempotency.Event) {
		if e.Decision == idempotency.DecisionExecuted {
			r.executed <- struct{}{}
		}
	})
	opts := []idempotency.ServerOption{idempotency.WithLease(shutdownLease)}
	r.a = testserver.New(t, &testserver.Service{Handler: blocked}, append(serverOpts,
		grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(r.storeA,
			append(opts, idempotency.WithObserver(observer))...)))...)
	r.b = testserver.New(t, &testserver.Service{},
		grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(mem, opts...)))
	r.clientA, r.clientB = r.a.Client(t), r.b.Client(t)
	// Every test ends with A's handler returned and settled: a bubble ends
	// only when all its goroutines have.
	t.Cleanup(func() { r.unblock(); r.a.GRPC.GracefulStop() })
	return r
}

func (r *shutdownRig) unblock() { r.releaseOnce.Do(func() { close(r.release) }) }

// callAndLeave sends a call to A and leaves once its handler runs: the
// handler goes on, detached from its caller.
func (r *shutdownRig) callAndLeave(t *testing.T, key string) {
	t.Helper()
	ctx, leave := context.WithCancel(withKey(t.Context(), key))
	errc := make(chan error, 1)
	go func() {
		_, err := r.clientA.Do(ctx, &testingv1.DoRequest{Payload: "charge"})
		errc <- err
	}()
	<-r.started
	leave()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("the call that left: %v, want CANCELED", err)
	}
}

// stopInBackground calls stop and closes the returned channel when it
// returns.
func stopInBackground(stop func()) <-chan struct{} {
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	return stopped
}

// wantInUse checks that a duplicate on B is refused: the key is in flight.
func (r *shutdownRig) wantInUse(t *testing.T, key string) {
	t.Helper()
	_, err := r.clientB.Do(withKey(t.Context(), key), &testingv1.DoRequest{Payload: "charge"})
	wantReason(t, err, codes.Aborted, idempotency.ErrKeyInUse.Reason)
}

// retryOnB sends the retry to B and returns its answer and the number of
// executions on both servers.
func (r *shutdownRig) retryOnB(t *testing.T, key string) (*testingv1.DoResponse, int64) {
	t.Helper()
	resp, err := r.clientB.Do(withKey(t.Context(), key), &testingv1.DoRequest{Payload: "charge"})
	if err != nil {
		t.Fatalf("retry on B: %v", err)
	}
	return resp, r.a.Service.Executions() + r.b.Service.Executions()
}

// TestGracefulStopWaitsForDetachedHandler: GracefulStop, and Stop on a
// server built with grpc.WaitForHandlers(true), do not return while a
// detached handler (its caller gone) still runs; when they return, its
// outcome is stored, and a retry on another server over the same store
// replays it.
func TestGracefulStopWaitsForDetachedHandler(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		opts []grpc.ServerOption
		stop func(*grpc.Server)
	}{
		"GracefulStop":          {stop: (*grpc.Server).GracefulStop},
		"Stop, WaitForHandlers": {opts: []grpc.ServerOption{grpc.WaitForHandlers(true)}, stop: (*grpc.Server).Stop},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				r := newShutdownRig(t, c.opts...)
				r.callAndLeave(t, "k-graceful")
				stopped := stopInBackground(func() { c.stop(r.a.GRPC) })
				synctest.Wait()
				select {
				case <-stopped:
					t.Fatal("the server stopped while its detached handler was still running")
				default:
				}
				r.wantInUse(t, "k-graceful")

				r.unblock()
				<-stopped
				resp, executions := r.retryOnB(t, "k-graceful")
				if resp.GetPayload() != "charge" || resp.GetExecution() != 1 || executions != 1 {
					t.Fatalf("retry on B: %v after %d executions; want A's answer replayed, one execution", resp, executions)
				}
			})
		})
	}
}

// TestHardStopLeavesKeyInFlight: Stop returns while a detached handler
// still runs, and its key is in flight: a duplicate on another server is
// refused as in use. What follows depends on the process. If it goes on,
// the handler's goroutine finishes and stores its outcome, and the retry
// replays it. If it exits (here: A loses its store, so nothing renews or
// completes the claim, as after a crash), the key stays in flight until
// its lease ends, and then a retry runs the handler again.
func TestHardStopLeavesKeyInFlight(t *testing.T) {
	t.Parallel()
	t.Run("the process goes on", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			r := newShutdownRig(t)
			r.callAndLeave(t, "k-stop")
			r.a.GRPC.Stop()
			r.wantInUse(t, "k-stop")

			r.unblock()
			<-r.executed // the detached handler's outcome, stored after Stop returned
			resp, executions := r.retryOnB(t, "k-stop")
			if resp.GetExecution() != 1 || executions != 1 {
				t.Fatalf("retry on B: %v after %d executions; want A's answer replayed, one execution", resp, executions)
			}
		})
	})
	t.Run("the process exits", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			r := newShutdownRig(t)
			r.callAndLeave(t, "k-crash")
			r.a.GRPC.Stop()
			r.storeA.Down.Store(true) // the process is gone: no renewal, no completion
			r.wantInUse(t, "k-crash")

			time.Sleep(shutdownLease) // the bubble's clock: the lease runs out
			resp, executions := r.retryOnB(t, "k-crash")
			if resp.GetExecution() != 1 || executions != 2 {
				t.Fatalf("retry on B after the lease: %v after %d executions; want B to run the handler, two executions", resp, executions)
			}
		})
	})
}
