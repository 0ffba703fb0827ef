package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
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
	rig := newClientRig(t, rigConfig{handler: chargeThenBookkeep(&charges, 300*time.Millisecond),
		server: []idempotency.ServerOption{idempotency.WithRetryAfter(50 * time.Millisecond)}})
	client := rig.client(t, idempotency.UnaryClientInterceptor(
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
	wantOneKey(t, rig.attempts.all())
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
	_, err := f.client.Do(short, &testingv1.DoRequest{Payload: "p"})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("first call: %v, want DEADLINE_EXCEEDED", err)
	}
	resp, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
	if err != nil || resp.GetPayload() != "p" {
		t.Fatalf("retry: %v %v, want the first execution's answer", resp, err)
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
	if n := f.events.Count(idempotency.DecisionReplayed); n != 1 {
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
			if _, err := f.client.Do(gone, &testingv1.DoRequest{}); status.Code(err) != codes.Canceled {
				t.Fatalf("first call: %v, want CANCELED", err)
			}
			if err := <-sawCancel; !errors.Is(err, context.Canceled) {
				t.Fatalf("handler context ended with %v, want its caller's cancellation", err)
			}
			f.events.Wait(t, idempotency.DecisionReleased, 1)
			if _, err := f.client.Do(ctx, &testingv1.DoRequest{}); err != nil {
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
				_, _ = f.client.Do(ctx, &testingv1.DoRequest{})
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
			f.events.Wait(t, idempotency.DecisionReleased, 1)
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
	if _, err := f.client.Do(gone, &testingv1.DoRequest{Payload: "p"}); status.Code(err) != codes.Canceled {
		t.Fatalf("first call: %v, want CANCELED", err)
	}
	f.events.Wait(t, idempotency.DecisionExecuted, 1)
	resp, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
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
	if _, err := f.client.Do(ctx, &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := <-deadlines; got.Before(want.Add(-time.Minute)) {
		t.Fatalf("handler deadline %v, want the caller's %v", got, want)
	}
}
