package idempotency_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

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
