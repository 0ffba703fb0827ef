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
	"github.com/grpc-idempotency/idempotency/internal/test/behaviourtest"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
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
			f.Faults.Stall(tc.op, 1000)
			done := make(chan error, 1)
			go func() {
				// No deadline: only the store timeout can end a stall.
				_, err := f.Client.Do(withKey(context.WithoutCancel(t.Context()), "k-stall-"+tc.op), &testingv1.DoRequest{})
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
			if n := f.Faults.Count(tc.op); n == 0 {
				t.Fatalf("no %s call was made", tc.op)
			}
		})
	}
}

// TestCompleteGaveUpIsLeaseLost: when the store fails every attempt to
// store an outcome until the store timeout, the claim is left to end with
// its lease, after which a retry runs the handler again (decision 9). The
// observer used to get only the store_error of each attempt, so nothing
// told an operator (or the stream chaos soak, which counted the second run
// as a double execution) that the key may run again. It now gets one
// lease_lost after them, whose error matches store.ErrLeaseLost and the
// store's last error; the caller still gets the handler's answer.
func TestCompleteGaveUpIsLeaseLost(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	handler := func(_ context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return &testingv1.DoResponse{Payload: req.GetPayload(), Execution: runs.Add(1)}, nil
	}
	f := newFixture(t, handler, idempotency.WithStoreTimeout(100*time.Millisecond), idempotency.WithLease(300*time.Millisecond))
	f.Faults.FailCompletes(1 << 30)
	ctx, req := withKey(t.Context(), "k-not-stored"), &testingv1.DoRequest{Payload: "p"}
	resp, err := f.Client.Do(ctx, req)
	if err != nil || resp.GetExecution() != 1 {
		t.Fatalf("got %v, %v; want the handler's answer", resp, err)
	}

	evs := f.Events.All()
	var decisions []idempotency.Decision
	for _, ev := range evs {
		decisions = append(decisions, ev.Decision)
	}
	switch {
	case f.Events.Count(idempotency.DecisionStoreError) == 0:
		t.Fatalf("events %v: no store_error, so the store never failed", decisions)
	case f.Events.Count(idempotency.DecisionExecuted) != 0:
		t.Fatalf("events %v: executed, for an outcome that was not stored", decisions)
	case f.Events.Count(idempotency.DecisionLeaseLost) != 1 || decisions[len(decisions)-1] != idempotency.DecisionLeaseLost:
		t.Fatalf("events %v, want one lease_lost, after the store errors", decisions)
	case !errors.Is(evs[len(evs)-1].Err, store.ErrLeaseLost) || !errors.Is(evs[len(evs)-1].Err, faultstore.ErrDown):
		t.Fatalf("lease_lost error %v, want one matching store.ErrLeaseLost and the store's error", evs[len(evs)-1].Err)
	}

	// What the event says holds: once the lease has ended, a retry runs
	// the handler again, and its outcome is stored.
	f.Faults.FailCompletes(0)
	waitFor(t, func() bool {
		resp, err = f.Client.Do(ctx, req)
		return err == nil
	})
	if resp.GetExecution() != 2 || f.Events.Count(idempotency.DecisionExecuted) != 1 {
		t.Fatalf("after the lease: answer of run %d, %d executed events; want run 2's, stored",
			resp.GetExecution(), f.Events.Count(idempotency.DecisionExecuted))
	}
}

// TestBehaviour runs the table of docs/semantics/README.md against every entry point
// on the memory store; the integration module runs it on Redis and
// PostgreSQL.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	behaviourtest.Run(t, func(t *testing.T) store.Store {
		mem := memStore(t)
		return mem
	})
}
