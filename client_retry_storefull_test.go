package idempotency_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A call refused because the store is full (RESOURCE_EXHAUSTED with
// IDEMPOTENCY_STORE_FULL) never ran its handler, so the client retries it
// with the same key after the server's RetryInfo delay, within
// WithMaxAttempts: once room is made the retry runs the handler once; while
// the store stays full the call ends after the last attempt with the
// server's answer.
func TestClientRetriesStoreFull(t *testing.T) {
	t.Parallel()
	const retryAfter = 20 * time.Millisecond
	tests := []struct {
		name      string
		makeRoom  bool
		wantCode  codes.Code
		wantExecs int64
	}{
		{name: "room made before the retry", makeRoom: true, wantCode: codes.OK, wantExecs: 1},
		{name: "store stays full", wantCode: codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem := memStore(t, memorystore.WithMaxEntries(1))
			filler, err := mem.Claim(t.Context(), "filler", nil, time.Hour)
			if err != nil || !filler.Won() {
				t.Fatalf("filling the store: won=%v err=%v", filler.Won(), err)
			}
			rig := newClientRig(t, rigConfig{store: mem, server: []idempotency.ServerOption{idempotency.WithRetryAfter(retryAfter)}})

			var retriedAfter []error
			client := rig.client(t, idempotency.UnaryClientInterceptor(
				idempotency.WithBackoff(noBackoff),
				idempotency.WithMaxAttempts(3),
				idempotency.WithOnRetry(func(ctx context.Context, _ int, err error) {
					retriedAfter = append(retriedAfter, err) // the hook runs on the calling goroutine
					if tt.makeRoom && len(retriedAfter) == 1 {
						if err := mem.Release(ctx, "filler", filler.Token); err != nil {
							t.Errorf("making room: %v", err)
						}
					}
				}),
			))

			_, err = client.Do(t.Context(), &testingv1.DoRequest{Payload: "p"})
			if status.Code(err) != tt.wantCode {
				t.Fatalf("err = %v, want %v", err, tt.wantCode)
			}
			if err != nil && clientReason(err) != idempotency.ErrStoreFull.Reason {
				t.Fatalf("err = %v (reason %q), want reason %s", err, clientReason(err), idempotency.ErrStoreFull.Reason)
			}
			if len(retriedAfter) == 0 || status.Code(retriedAfter[0]) != codes.ResourceExhausted ||
				clientReason(retriedAfter[0]) != idempotency.ErrStoreFull.Reason {
				t.Fatalf("retried after %v, want RESOURCE_EXHAUSTED with %s", retriedAfter, idempotency.ErrStoreFull.Reason)
			}
			attempts := rig.attempts.all()
			wantAttempts := 3
			if tt.makeRoom {
				wantAttempts = 2
			}
			if len(attempts) != wantAttempts {
				t.Fatalf("server saw %d attempts, want %d", len(attempts), wantAttempts)
			}
			wantOneKey(t, attempts)
			if gap := attempts[1].at.Sub(attempts[0].at); gap < retryAfter {
				t.Fatalf("retry came %v after the refusal, want at least the server's RetryInfo %v", gap, retryAfter)
			}
			if n := rig.executions(); n != tt.wantExecs {
				t.Fatalf("handler ran %d times, want %d", n, tt.wantExecs)
			}
		})
	}
}
