package idempotency_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// declineOdd answers with the request, or with a stored error
// (FAILED_PRECONDITION) when its amount is odd.
func declineOdd(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	if req.GetAmount()%2 != 0 {
		return nil, status.Error(codes.FailedPrecondition, "declined")
	}
	return testserver.Echo(ctx, m, req)
}

// TestReplayedFromHeaderAndTrailer: Replayed tells a replayed answer from
// an executed one from the call's header and trailer, for a success (the
// marker is in the header) and for an error (in the trailer).
func TestReplayedFromHeaderAndTrailer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, declineOdd)
	for name, amount := range map[string]int64{"success": 2, "error": 1} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := withKey(t.Context(), "k-replayed-"+name)
			for i, want := range []bool{false, true, true} {
				var header, trailer metadata.MD
				_, err := f.Client.Do(ctx, &testingv1.DoRequest{Amount: amount}, grpc.Header(&header), grpc.Trailer(&trailer))
				if (err == nil) != (amount == 2) {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if got := idempotency.Replayed(header, trailer); got != want {
					t.Fatalf("call %d: Replayed = %v, want %v (header %v, trailer %v)", i+1, got, want, header, trailer)
				}
			}
		})
	}
}

// markThenFail fails the first attempt with UNAVAILABLE and a replay
// marker in its trailer, outside the idempotency interceptor (which would
// strip it), and lets every later attempt through.
func markThenFail() grpc.UnaryServerInterceptor {
	first := make(chan struct{}, 1)
	first <- struct{}{}
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		select {
		case <-first:
			_ = grpc.SetTrailer(ctx, metadata.Pairs(idempotency.ReplayedKey, "true"))
			return nil, status.Error(codes.Unavailable, "marked, then lost")
		default:
			return handler(ctx, req)
		}
	}
}

// TestReplayedInto: ReplayedInto reports whether the answer the caller got
// from UnaryClientInterceptor was replayed: that of the last attempt, after
// retries; a success or an error; with or without retries.
func TestReplayedInto(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		fault  grpc.UnaryServerInterceptor
		client []idempotency.ClientOption
		method string
		amount int64
		want   []bool // per call, each with the same key
	}{
		{name: "executed, then replayed", amount: 2, want: []bool{false, true}},
		{name: "error executed, then replayed", amount: 1, want: []bool{false, true}},
		{name: "response lost, the retry replays", fault: loseResponses(1), amount: 2, want: []bool{true}},
		{name: "error lost, the retry replays", fault: loseResponses(1), amount: 1, want: []bool{true}},
		{name: "a marked attempt, then an executed one", fault: markThenFail(), amount: 2, want: []bool{false}},
		{name: "without retries", client: []idempotency.ClientOption{idempotency.WithoutRetry()}, amount: 2, want: []bool{false, true}},
		{name: "method without a key", method: "Read", amount: 2, want: []bool{false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := testkit.Start(t, testkit.Config{Handler: declineOdd, Outer: []grpc.UnaryServerInterceptor{tc.fault}})
			opts := append([]idempotency.ClientOption{idempotency.WithBackoff(noBackoff)}, tc.client...)
			call := methodOf(rig.ClientWith(t, idempotency.UnaryClientInterceptor(opts...)), tc.method)
			for i, want := range tc.want {
				got := !want // set by the interceptor
				_, err := call(t.Context(), &testingv1.DoRequest{Amount: tc.amount},
					idempotency.WithKey("k-into"), idempotency.ReplayedInto(&got))
				if (err == nil) != (tc.amount == 2) {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if got != want {
					t.Fatalf("call %d: replayed %v, want %v", i+1, got, want)
				}
			}
		})
	}
}
