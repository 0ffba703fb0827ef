package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A Once inside a Once of the same operation and key passes through under
// the outer claim once; a second one in the same run finds the key in
// flight, so the inner function runs once per key.
func TestNestedOnceSameKeyRunsOnce(t *testing.T) {
	t.Parallel()
	f := newFnFixture(t)
	var inner atomic.Int64
	var rans [2]bool
	var errs [2]error
	_, err := idempotency.Once(t.Context(), f.srv, "op", "k", nil, func(ctx context.Context) error {
		for i := range rans {
			rans[i], errs[i] = idempotency.Once(ctx, f.srv, "op", "k", nil, func(context.Context) error { inner.Add(1); return nil })
		}
		return nil
	})
	if err != nil {
		t.Fatalf("outer Once: %v", err)
	}
	if n := inner.Load(); n != 1 {
		t.Fatalf("inner function ran %d times under one key (ran %v, errs %v)", n, rans, errs)
	}
	if !rans[0] || errs[0] != nil || rans[1] || !errors.Is(errs[1], idempotency.ErrKeyInUse) {
		t.Fatalf("inner Once calls: ran %v, errs %v; want the first to run and the second ErrKeyInUse", rans, errs)
	}
}

// A context that carries a claim, kept past the Once that claimed it (by
// a goroutine its function started), does not let a later Once with the
// key run again: it replays the stored outcome, whether the goroutine kept
// the context as it was (ended with the work) or without its cancellation.
// After a retryable error released the key, a Once on the ended context
// returns its context error and runs nothing; one detached from the
// cancellation runs again, as any call would.
func TestClaimContextAfterOnceRunsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		keep     func(context.Context) context.Context
		released bool // the outer function failed with a retryable error
		ran      bool
		err      error
	}{
		{"kept as is", func(ctx context.Context) context.Context { return ctx }, false, false, nil},
		{"kept without cancellation", context.WithoutCancel, false, false, nil},
		{"kept as is, key released", func(ctx context.Context) context.Context { return ctx }, true, false, context.Canceled},
		{"kept without cancellation, key released", context.WithoutCancel, true, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFnFixture(t)
			var kept context.Context
			var runs atomic.Int64
			_, _ = idempotency.Once(t.Context(), f.srv, "op", "k", nil, func(ctx context.Context) error {
				kept = tc.keep(ctx)
				runs.Add(1)
				if tc.released {
					return status.Error(codes.Unavailable, "try again")
				}
				return nil
			})
			ran, err := idempotency.Once(kept, f.srv, "op", "k", nil, func(context.Context) error { runs.Add(1); return nil })
			wantRuns := int64(1)
			if tc.ran {
				wantRuns = 2
			}
			if ran != tc.ran || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || runs.Load() != wantRuns {
				t.Fatalf("Once with the kept context after the run: ran %v, %v, runs %d; want ran %v, %v", ran, err, runs.Load(), tc.ran, tc.err)
			}
		})
	}
}

// A nested Once that the work started in a goroutine of its own is still
// running when the work returns a retryable error: the claim is released
// only once the nested call has ended, so a retry cannot run the work again
// beside it.
func TestNestedOnceOutlivingItsWork(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := memorystore.New(memorystore.WithSweepInterval(0))
		defer func() { _ = mem.Close() }()
		srv := idempotency.NewServer(mem)
		var runs atomic.Int64
		nestedStarted, finishNested := make(chan struct{}), make(chan struct{})
		nestedErr := make(chan error, 1)
		work := func(ctx context.Context) error {
			runs.Add(1)
			go func() {
				_, err := idempotency.Once(ctx, srv, "op", "k", nil, func(context.Context) error {
					close(nestedStarted)
					<-finishNested
					return nil
				})
				nestedErr <- err
			}()
			<-nestedStarted // the nested call runs under the claim, and outlives the work
			return status.Error(codes.Unavailable, "try again")
		}
		outerDone := make(chan struct{})
		go func() {
			defer close(outerDone)
			_, _ = idempotency.Once(t.Context(), srv, "op", "k", nil, work)
		}()
		synctest.Wait() // the work has returned; the nested call runs

		if ran, err := idempotency.Once(t.Context(), srv, "op", "k", nil, work); ran || !errors.Is(err, idempotency.ErrKeyInUse) {
			t.Fatalf("Once while a nested call under the claim runs: ran %v, err %v; want ErrKeyInUse", ran, err)
		}
		close(finishNested)
		<-outerDone
		if err := <-nestedErr; err != nil {
			t.Fatalf("nested Once: %v", err)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the work ran %d times while its nested call ran, want 1", n)
		}
	})
}

// A method with a namespace and a Do under that namespace are one
// operation: a Do with the method's key and request, called by its
// handler, runs under the method's claim, once, instead of finding its own
// caller's claim in flight (and, under WithWaitForInFlight, waiting for
// it). The retry replays the method's answer, and so does a Do after it.
func TestDoInsideMethodOfItsNamespace(t *testing.T) {
	t.Parallel()
	const ns = "orders.charge"
	for _, wait := range []time.Duration{0, time.Second} {
		t.Run("wait="+wait.String(), func(t *testing.T) {
			t.Parallel()
			var srv *idempotency.Server
			var inner atomic.Int64
			charge := func(context.Context) (*testingv1.DoResponse, error) {
				return &testingv1.DoResponse{Payload: "charged", Amount: inner.Add(1)}, nil
			}
			f := newFixture(t, func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				resp, replayed, err := idempotency.Do(ctx, srv, ns, "k-1", req, charge)
				if err == nil && replayed {
					err = errors.New("the nested Do replayed")
				}
				return resp, err
			}, idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{Namespace: ns}),
				idempotency.WithWaitForInFlight(wait))
			srv = f.server
			req := &testingv1.DoRequest{Payload: "p", Amount: 5}
			for n := range 2 {
				resp, err := f.client.Do(withKey(t.Context(), "k-1"), req)
				if err != nil || resp.GetPayload() != "charged" || resp.GetExecution() != 1 {
					t.Fatalf("call %d: %v, %v; want the handler's one answer", n+1, resp, err)
				}
			}
			resp, replayed, err := idempotency.Do(t.Context(), srv, ns, "k-1", req, charge)
			if err != nil || !replayed || resp.GetExecution() != 1 {
				t.Fatalf("Do after the method: %v, replayed %v, %v; want the method's answer replayed", resp, replayed, err)
			}
			if n, h := inner.Load(), f.srv.Service.Executions(); n != 1 || h != 1 {
				t.Fatalf("the nested Do's function ran %d times and the handler %d, want 1 and 1", n, h)
			}
		})
	}
}

// A Once nested in a Once of its operation and key, with another request,
// is refused with ErrKeyReused, as it is after the outer run: the key
// stands for the outer request. It takes nothing from the outer claim: a
// nested Once with the outer request still passes through after it.
func TestNestedOnceOtherRequest(t *testing.T) {
	t.Parallel()
	f := newFnFixture(t)
	a, b := &testingv1.DoRequest{Amount: 1}, &testingv1.DoRequest{Amount: 2}
	var inner atomic.Int64
	count := func(context.Context) error { inner.Add(1); return nil }
	var rans [2]bool
	var errs [2]error
	if _, err := idempotency.Once(t.Context(), f.srv, "op", "k", a, func(ctx context.Context) error {
		rans[0], errs[0] = idempotency.Once(ctx, f.srv, "op", "k", b, count)
		rans[1], errs[1] = idempotency.Once(ctx, f.srv, "op", "k", a, count)
		return nil
	}); err != nil {
		t.Fatalf("outer Once: %v", err)
	}
	if rans[0] || !errors.Is(errs[0], idempotency.ErrKeyReused) {
		t.Fatalf("nested Once with another request: ran %v, %v; want ErrKeyReused", rans[0], errs[0])
	}
	if !rans[1] || errs[1] != nil || inner.Load() != 1 {
		t.Fatalf("nested Once with the outer request: ran %v, %v, inner runs %d; want it run once", rans[1], errs[1], inner.Load())
	}
	if ran, err := idempotency.Once(t.Context(), f.srv, "op", "k", b, count); ran || !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("Once with another request after the run: ran %v, %v; want ErrKeyReused", ran, err)
	}

	// Once a retryable error has released the key, a Once with another
	// request on a context kept from that run claims it as any call would.
	var kept context.Context
	_, _ = idempotency.Once(t.Context(), f.srv, "op", "k2", a, func(ctx context.Context) error {
		kept = context.WithoutCancel(ctx)
		return status.Error(codes.Unavailable, "try again")
	})
	if ran, err := idempotency.Once(kept, f.srv, "op", "k2", b, count); !ran || err != nil {
		t.Fatalf("Once with another request on a released key: ran %v, %v; want it run", ran, err)
	}
}
