package idempotency_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

// The retry waits at least as long as the server asked, through
// google.rpc.RetryInfo or the grpc-retry-pushback-ms trailer, or as long as
// the backoff when that is longer.
func TestClientWaitsForPushback(t *testing.T) {
	t.Parallel()
	const want = 300 * time.Millisecond
	constant := func(d time.Duration) func(context.Context, uint) time.Duration {
		return func(context.Context, uint) time.Duration { return d }
	}
	tests := []struct {
		name    string
		trailer string // grpc-retry-pushback-ms of the first answer, if any
		err     error  // the first answer
		backoff func(context.Context, uint) time.Duration
	}{
		{name: "RetryInfo", err: errorWith(codes.Aborted, idempotency.ErrorDomain, idempotency.ErrKeyInUse.Reason, want)},
		{name: "pushback trailer", trailer: "300", err: status.Error(codes.Unavailable, "busy")},
		{name: "trailer longer than RetryInfo", trailer: "300", err: errorWith(codes.Aborted, idempotency.ErrorDomain, idempotency.ErrKeyInUse.Reason, 10*time.Millisecond)},
		{name: "RetryInfo longer than trailer", trailer: "10", err: errorWith(codes.Unavailable, idempotency.ErrorDomain, idempotency.ErrStoreUnavailable.Reason, want)},
		{name: "backoff longer than pushback", trailer: "10", err: status.Error(codes.Unavailable, "busy"), backoff: constant(want)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			handler := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				if calls.Add(1) > 1 {
					return testserver.Echo(ctx, m, req)
				}
				if tt.trailer != "" {
					_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", tt.trailer))
				}
				return nil, tt.err
			}
			rig := newClientRig(t, rigConfig{handler: handler})
			backoff := tt.backoff
			if backoff == nil {
				backoff = noBackoff
			}
			client := rig.client(t, idempotency.UnaryClientInterceptor(idempotency.WithBackoff(backoff)))

			if _, err := client.Do(t.Context(), &testingv1.DoRequest{}); err != nil {
				t.Fatal(err)
			}
			attempts := rig.attempts.all()
			if len(attempts) != 2 {
				t.Fatalf("server saw %d attempts, want 2", len(attempts))
			}
			if gap := attempts[1].at.Sub(attempts[0].at); gap < want {
				t.Fatalf("retry came %v after the first attempt, want at least %v", gap, want)
			}
		})
	}
}

// Against the real in-flight rejection: every retry waits for the server's
// pushback, no attempt starts after the caller's deadline, and the call
// ends with the last rejection rather than sleeping into the deadline.
func TestClientPushbackStopsBeforeDeadline(t *testing.T) {
	t.Parallel()
	const pushback = 300 * time.Millisecond
	started, release := make(chan struct{}, 1), make(chan struct{})
	handler := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		started <- struct{}{}
		<-release
		return testserver.Echo(ctx, m, req)
	}
	rig := newClientRig(t, rigConfig{handler: handler, server: []idempotency.ServerOption{idempotency.WithRetryAfter(pushback)}})
	original := make(chan error, 1)
	holder := rig.client(t, idempotency.UnaryClientInterceptor(idempotency.WithoutRetry()))
	go func() {
		_, err := holder.Do(t.Context(), &testingv1.DoRequest{}, idempotency.WithKey("k-deadline"))
		original <- err
	}()
	<-started
	defer func() {
		close(release)
		if err := <-original; err != nil {
			t.Error(err)
		}
	}()

	client := rig.client(t, idempotency.UnaryClientInterceptor(idempotency.WithBackoff(noBackoff), idempotency.WithMaxAttempts(100)))
	deadline := time.Now().Add(800 * time.Millisecond)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	_, err := client.Do(ctx, &testingv1.DoRequest{}, idempotency.WithKey("k-deadline"))
	if status.Code(err) != codes.Aborted || clientReason(err) != idempotency.ErrKeyInUse.Reason {
		t.Fatalf("err = %v, want the last ABORTED with %s, returned before the deadline", err, idempotency.ErrKeyInUse.Reason)
	}

	attempts := rig.attempts.all()[1:] // the first is the original's
	if len(attempts) < 2 {
		t.Fatalf("server saw %d attempts of the duplicate, want at least 2", len(attempts))
	}
	for i, a := range attempts {
		if !a.at.Before(deadline) {
			t.Fatalf("attempt %d started %v after the deadline", i+1, a.at.Sub(deadline))
		}
		if i > 0 {
			if gap := a.at.Sub(attempts[i-1].at); gap < pushback {
				t.Fatalf("attempt %d came %v after the one before, want at least the pushback %v", i+1, gap, pushback)
			}
		}
	}
}

// A wait that would end after the caller's deadline is not started: the
// last error comes back at once, with its details.
func TestClientDoesNotSleepPastDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		backoff    func(context.Context, uint) time.Duration
		wantCode   codes.Code
		wantReason string
	}{
		{
			name:     "backoff",
			err:      errorWith(codes.Unavailable, idempotency.ErrorDomain, idempotency.ErrStoreUnavailable.Reason, 0),
			backoff:  func(context.Context, uint) time.Duration { return time.Hour },
			wantCode: codes.Unavailable, wantReason: idempotency.ErrStoreUnavailable.Reason,
		},
		{
			name:     "pushback",
			err:      errorWith(codes.Aborted, idempotency.ErrorDomain, idempotency.ErrKeyInUse.Reason, time.Hour),
			backoff:  noBackoff,
			wantCode: codes.Aborted, wantReason: idempotency.ErrKeyInUse.Reason,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := newClientRig(t, rigConfig{handler: func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				return nil, tt.err
			}})
			client := rig.client(t, idempotency.UnaryClientInterceptor(idempotency.WithBackoff(tt.backoff)))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()

			// Sleeping would end the call with DEADLINE_EXCEEDED a minute from now.
			_, err := client.Do(ctx, &testingv1.DoRequest{})
			if status.Code(err) != tt.wantCode || clientReason(err) != tt.wantReason {
				t.Fatalf("err = %v, want %v with %s", err, tt.wantCode, tt.wantReason)
			}
			if n := len(rig.attempts.all()); n != 1 {
				t.Fatalf("server saw %d attempts, want 1", n)
			}
		})
	}
}

// Cancelling the caller's context ends the backoff at once.
func TestClientStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	seen := make(chan struct{}, 1)
	rig := newClientRig(t, rigConfig{handler: func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		seen <- struct{}{}
		return nil, status.Error(codes.Unavailable, "down")
	}})
	client := rig.client(t, idempotency.UnaryClientInterceptor(
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return time.Hour }),
	))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := client.Do(ctx, &testingv1.DoRequest{})
		done <- err
	}()
	<-seen
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("err = %v, want CANCELED", err)
	}
	if n := len(rig.attempts.all()); n != 1 {
		t.Fatalf("server saw %d attempts, want 1", n)
	}
}
