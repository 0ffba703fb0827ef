package idempotency_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// TestStreamClientCallContext: through StreamClientInterceptor, a server
// stream cut after replayedAt live messages and resumed by a retry is one
// call to its caller. Its Context lives as long as the call, not the
// first attempt: not done after the cut, done once the call has ended, and
// it carries the attempt's values (the peer). The grpc.Header call option
// gets what Header returns, the first attempt's header (live, unmarked),
// not the retry's replayed one.
func TestStreamClientCallContext(t *testing.T) {
	t.Parallel()
	r := newStreamRig(t)
	at, cut := r.cutFirst(t, cutAfterLive)
	var header metadata.MD
	stream, err := r.client.Download(t.Context(), &testingv1.DoRequest{Payload: "d", Amount: replayedLen, RequestId: "k-ctx"},
		grpc.Header(&header), grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	var got []*testingv1.DoResponse
	var callCtx context.Context // Context() once the first message came: code watching it
	for {
		if len(got) == at {
			cut()
		}
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d messages: %v", len(got), err)
		}
		got = append(got, m)
		if callCtx == nil {
			callCtx = stream.Context()
		}
		if err := callCtx.Err(); err != nil {
			t.Fatalf("Context() after message %d: %v; want it live until the call ends", len(got), err)
		}
		if _, ok := peer.FromContext(stream.Context()); !ok {
			t.Fatalf("Context() after message %d carries no peer", len(got))
		}
	}
	wantSequence(t, got, replayedLen)
	if r.retries.Load() == 0 || r.svc.Executions() != 1 {
		t.Fatalf("%d retries, %d executions; want a retry and one execution", r.retries.Load(), r.svc.Executions())
	}
	select {
	case <-callCtx.Done():
	default:
		t.Fatal("Context() not done after the call ended")
	}
	h, err := stream.Header()
	if err != nil || idempotency.Replayed(h, nil) || !slices.Equal(h.Get("x-execution"), []string{"1"}) {
		t.Fatalf("Header() = %v, %v; want the first attempt's, unmarked", h, err)
	}
	if idempotency.Replayed(header, nil) || !slices.Equal(header.Get("x-execution"), h.Get("x-execution")) {
		t.Fatalf("grpc.Header gave %v, Header() %v; want the same", header, h)
	}
}
