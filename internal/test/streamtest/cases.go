package streamtest

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// RunCore runs the core stream cases over the store newStore returns:
// concurrent duplicates over two Server values run a handler once, a
// server stream (ending in a stored error) replays byte for byte, a retry
// resumes after N messages, and a caller that leaves mid-stream does not
// stop the handler, whose whole stream a retry gets.
func RunCore(t *testing.T, newStore func(t *testing.T) store.Store) {
	st := newStore(t)
	opts := append(Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired}),
		idempotency.WithWaitForInFlight(time.Minute))
	// start serves a fresh service behind two Server values over st.
	start := func(t *testing.T) (*Service, [2]testgrpc.TestServiceClient) {
		t.Helper()
		svc := &Service{}
		return svc, [2]testgrpc.TestServiceClient{
			Start(t, svc, idempotency.NewServer(st, opts...)),
			Start(t, svc, idempotency.NewServer(st, opts...)),
		}
	}
	t.Run("OnceAcrossServers", func(t *testing.T) {
		t.Parallel()
		svc, clients := start(t)
		const callers = 16
		outputs := make([]Answer, callers)
		inputs := make([]int32, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				ctx := testkit.WithKey(t.Context(), "out-"+t.Name())
				outputs[i] = Output(ctx, clients[i%2], OutputRequest(5, 64))
				ctx = testkit.WithKey(t.Context(), "in-"+t.Name())
				resp, _, err := Input(ctx, clients[i%2], []byte("ab"), []byte("cde"))
				if err != nil {
					t.Errorf("StreamingInputCall %d: %v", i, err)
				}
				inputs[i] = resp.GetAggregatedPayloadSize()
			})
		}
		wg.Wait()
		if n := svc.Executions(); n != 2 {
			t.Fatalf("handlers ran %d times, want once per method", n)
		}
		executed := 0
		for i, a := range outputs {
			if a.Err != nil || len(a.Messages) != 5 || !slices.EqualFunc(a.Messages, outputs[0].Messages, bytes.Equal) {
				t.Fatalf("caller %d got %d messages, %v; want caller 0's 5", i, len(a.Messages), a.Err)
			}
			if !a.Replayed {
				executed++
			}
			if inputs[i] != 5 {
				t.Fatalf("caller %d: aggregated size %d, want 5", i, inputs[i])
			}
		}
		if executed != 1 {
			t.Fatalf("%d answers unmarked, want the one that ran", executed)
		}
	})
	t.Run("ReplayByteForByte", func(t *testing.T) {
		t.Parallel()
		svc, clients := start(t)
		ctx := testkit.WithKey(t.Context(), t.Name())
		req := OutputRequest(3, 1000)
		req.ResponseStatus = &testgrpc.EchoStatus{Code: 3, Message: "amount too large"} // INVALID_ARGUMENT: stored
		first := Output(ctx, clients[0], req)
		again := Output(ctx, clients[1], req)
		if first.Replayed || !again.Replayed {
			t.Fatalf("replay markers: first %v, retry %v; want false, true (%v %v %v %v)", first.Replayed, again.Replayed, again.Header, again.Trailer, again.Err, len(again.Messages))
		}
		if len(first.Messages) != 3 || !slices.EqualFunc(first.Messages, again.Messages, bytes.Equal) {
			t.Fatalf("retry got %d messages, not the first call's %d byte for byte", len(again.Messages), len(first.Messages))
		}
		s1, s2 := status.Convert(first.Err), status.Convert(again.Err)
		if s1.Code() != 3 || s1.Code() != s2.Code() || s1.Message() != s2.Message() {
			t.Fatalf("statuses %v and %v, want the same INVALID_ARGUMENT", s1, s2)
		}
		if !slices.Equal(again.ExecutionHeaders, []string{"1"}) || !slices.Equal(again.Trailer.Get("x-sent"), []string{"3"}) {
			t.Fatalf("replayed header %v, trailer %v; want the first call's", again.Header, again.Trailer)
		}
		if n := svc.Executions(); n != 1 {
			t.Fatalf("handler ran %d times", n)
		}
	})
	t.Run("ResumeAfter", func(t *testing.T) {
		t.Parallel()
		svc, clients := start(t)
		ctx := testkit.WithKey(t.Context(), t.Name())
		first := Output(ctx, clients[0], OutputRequest(5, 32))
		for _, n := range []int{0, 2, 5, 9} {
			rctx := metadata.AppendToOutgoingContext(ctx, idempotency.ResumeAfterKey, strconv.Itoa(n))
			got := Output(rctx, clients[1], OutputRequest(5, 32))
			want := first.Messages[min(n, 5):]
			if got.Err != nil || !got.Replayed || !slices.EqualFunc(got.Messages, want, bytes.Equal) {
				t.Fatalf("resume after %d: %d messages, %v, replayed %v; want the last %d", n, len(got.Messages), got.Err, got.Replayed, len(want))
			}
		}
		if n := svc.Executions(); n != 1 {
			t.Fatalf("handler ran %d times", n)
		}
	})
	t.Run("CallerLeaves", func(t *testing.T) {
		t.Parallel()
		svc, clients := start(t)
		leave := make(chan struct{})
		svc.BeforeSend = func(_ context.Context, i int) {
			if i == 2 {
				<-leave // the caller has taken two messages and gone
			}
		}
		ctx := testkit.WithKey(t.Context(), t.Name())
		cctx, cancel := context.WithCancel(ctx)
		stream, err := clients[0].StreamingOutputCall(cctx, OutputRequest(5, 32))
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := stream.Recv(); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		close(leave)
		got := Output(ctx, clients[1], OutputRequest(5, 32))
		if got.Err != nil || len(got.Messages) != 5 || !got.Replayed {
			t.Fatalf("retry: %d messages, %v, replayed %v; want all 5 replayed", len(got.Messages), got.Err, got.Replayed)
		}
		if n, sent := svc.Executions(), svc.Sent(); n != 1 || sent != 5 {
			t.Fatalf("handler ran %d times and sent %d messages; want once, all 5", n, sent)
		}
	})
}
