package idempotency_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

// TestStoreTimeoutBoundsEveryStoreCall: a store call that stalls until its
// context ends used to hold a call without a deadline for ever (Complete
// and Release were detached from the caller and unbounded; Claim had only
// the caller's deadline). Every store call now runs under
// WithStoreTimeout, each retry attempt included.
func TestStoreTimeoutBoundsEveryStoreCall(t *testing.T) {
	t.Parallel()
	failing := func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return nil, status.Error(codes.Unavailable, "downstream")
	}
	cases := []struct {
		name    string
		op      string
		handler testserver.HandlerFunc
		want    codes.Code
	}{
		{"claim", "claim", nil, codes.Unavailable},
		{"complete", "complete", nil, codes.OK},
		{"release", "release", failing, codes.Unavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tc.handler, idempotency.WithStoreTimeout(300*time.Millisecond))
			f.store.Stall(tc.op, 1000)
			done := make(chan error, 1)
			go func() {
				// No deadline: only the store timeout can end a stall.
				_, err := f.client.Do(withKey(context.WithoutCancel(t.Context()), "k-stall-"+tc.op), &testingv1.DoRequest{})
				done <- err
			}()
			select {
			case err := <-done:
				if status.Code(err) != tc.want {
					t.Fatalf("call ended with %v, want %v", err, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("a call whose store %s stalls has not returned after 10s", tc.op)
			}
			if n := f.store.Count(tc.op); n == 0 {
				t.Fatalf("no %s call was made", tc.op)
			}
		})
	}
}
