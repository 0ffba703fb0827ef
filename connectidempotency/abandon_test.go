package connectidempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest/gen/idempotency/testing/v1/testingv1connect"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestAbandonedBlocked (decision 301): on every protocol, a key whose
// claim was abandoned, under AbandonBlock, is refused with Connect code
// failed_precondition whose error details carry the ErrorInfo reason
// IDEMPOTENCY_OUTCOME_UNKNOWN (errors.Is finds ErrOutcomeUnknown), and
// no RetryInfo; the client interceptor does not retry it (one request on
// the wire, no retry hook call); the handler never runs, and the key
// stays abandoned.
func TestAbandonedBlocked(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		var runs runs
		var retries atomic.Int64
		srv, mem := memServer(t, idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
		sk := testkit.Abandon(t, mem, srv, testingv1connect.TestServiceDoProcedure, testingv1connect.TestServiceDoProcedure, "k",
			&testingv1.DoRequest{Payload: "pay"})
		r := newRig(t, p, setup{srv: srv, handler: runs.handler})
		onRetry := idempotency.WithOnRetry(func(context.Context, int, error) { retries.Add(1) })
		w := r.recordWire(t, p, clientOpts(onRetry)...)
		for range 2 {
			_, err := r.unary.Do(t.Context(), request("pay", "k"))
			ce := wantCode(t, err, connect.CodeFailedPrecondition, idempotency.ErrOutcomeUnknown.Reason)
			if !errors.Is(err, idempotency.ErrOutcomeUnknown) {
				t.Fatalf("errors.Is(%v, ErrOutcomeUnknown) = false", err)
			}
			if ce.Message() != idempotency.ErrOutcomeUnknown.Error() {
				t.Fatalf("message %q, want ErrOutcomeUnknown's", ce.Message())
			}
			for _, d := range ce.Details() {
				if d.Type() == "google.rpc.RetryInfo" {
					t.Fatal("a RetryInfo on a blocked key's error")
				}
			}
		}
		if n := len(w.answers()); n != 2 || retries.Load() != 0 {
			t.Fatalf("%d requests on the wire for 2 calls, %d retries: want no retry", n, retries.Load())
		}
		if runs.count() != 0 {
			t.Fatalf("the handler ran %d times", runs.count())
		}
		testkit.WantState(t, mem, sk, store.StateAbandoned)
	})
}

// TestAbandonedRecovered (decision 301): under AbandonRecover set for the
// method, the RecoverFunc's response is the call's answer, and every retry
// gets its replay; the handler never runs.
func TestAbandonedRecovered(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		var runs runs
		srv, mem := memServer(t, idempotency.WithMethodPolicy(testingv1connect.TestServiceDoProcedure, idempotency.MethodPolicy{
			Abandoned: idempotency.AbandonRecover,
			Recover: func(ctx context.Context, _ proto.Message) (proto.Message, error) {
				return &testingv1.DoResponse{Payload: "recovered"}, nil
			},
		}))
		testkit.Abandon(t, mem, srv, testingv1connect.TestServiceDoProcedure, testingv1connect.TestServiceDoProcedure, "k",
			&testingv1.DoRequest{Payload: "pay"})
		r := newRig(t, p, setup{srv: srv, handler: runs.handler})
		first, err := r.unary.Do(t.Context(), request("pay", "k"))
		if err != nil || first.Msg.GetPayload() != "recovered" || connectidempotency.Replayed(first.Header()) {
			t.Fatalf("first: %v, %v; want the recovered response", first, err)
		}
		again, err := r.unary.Do(t.Context(), request("pay", "k"))
		if err != nil || again.Msg.GetPayload() != "recovered" || !connectidempotency.Replayed(again.Header()) {
			t.Fatalf("retry: %v, %v; want the recovered response, replayed", again, err)
		}
		if runs.count() != 0 {
			t.Fatalf("the handler ran %d times", runs.count())
		}
	})
}
