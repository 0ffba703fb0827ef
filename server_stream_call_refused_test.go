package idempotency_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/streamtest"
)

// scripted is an interop TestService whose StreamingOutputCall runs
// script, counting its runs.
type scripted struct {
	testgrpc.UnimplementedTestServiceServer
	script func(req *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error
	runs   atomic.Int64
}

func (s *scripted) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	s.runs.Add(1)
	return s.script(req, stream)
}

// message is message i of a scripted stream, of size bytes.
func message(i, size int) *testgrpc.StreamingOutputCallResponse {
	body := make([]byte, size)
	copy(body, fmt.Sprintf("m%d ", i))
	return &testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: body}}
}

// resumed is ctx asking for the messages after the first n.
func resumed(ctx context.Context, n int) context.Context {
	return metadata.AppendToOutgoingContext(ctx, idempotency.ResumeAfterKey, fmt.Sprint(n))
}

// TestStreamSendRefusedLive: grpc-go refuses a message over the server's
// MaxSendMsgSize, ends the stream with RESOURCE_EXHAUSTED and cancels its
// context before Send returns. The handler gets that error, as it would
// without the interceptor; the caller has message 1 and the refusal. A
// handler that returns the error releases its key (a retryable code): the
// retry runs it again (refused at its first message here) and gets that
// run's live answer. A handler that goes
// on and returns OK completes its key with what the caller got, message 1
// and the refusal, which every retry gets replayed (resumed after 2 too:
// never the messages no caller received, never OK). A caller that left
// before the message was sent changes none of it: the message is refused
// as it would have been with the caller there.
func TestStreamSendRefusedLive(t *testing.T) {
	t.Parallel()
	const (
		returns    = iota // the handler returns the refusal
		goesOn            // the handler sends on and returns OK
		callerLeft        // the caller left after message 1; the handler goes on
	)
	for _, mode := range []int{returns, goesOn, callerLeft} {
		t.Run([]string{"HandlerReturnsTheRefusal", "HandlerGoesOn", "CallerLeft"}[mode], func(t *testing.T) {
			t.Parallel()
			var sendErrs []error // of the first run
			finished := make(chan struct{})
			svc := &scripted{}
			svc.script = func(req *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
				if svc.runs.Load() > 1 {
					return stream.Send(message(0, 4096))
				}
				defer close(finished)
				for i, p := range req.GetResponseParameters() {
					if i == 1 && mode == callerLeft {
						<-stream.Context().Value(callerKey{}).(context.Context).Done()
					}
					err := stream.Send(message(i, int(p.GetSize())))
					sendErrs = append(sendErrs, err)
					if err != nil && mode == returns {
						return err
					}
				}
				stream.SetTrailer(metadata.Pairs("x-after-the-end", "1"))
				return nil
			}
			ev := &events{}
			s := idempotency.NewServer(memStore(t), append(streamtest.Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired}),
				idempotency.WithObserver(ev), idempotency.WithWaitForInFlight(time.Minute))...)
			c := streamtest.Start(t, svc, nil, grpc.MaxSendMsgSize(1024), grpc.ChainStreamInterceptor(keepStreamCaller, s.StreamServerInterceptor()))
			key := withKey(t.Context(), "refused")
			req := streamtest.OutputRequest(3, 16)
			req.ResponseParameters[1].Size = 4096

			wantRefused := func(name string, a streamtest.Answer, msgs int, replayed bool) {
				t.Helper()
				if status.Code(a.Err) != codes.ResourceExhausted || !strings.Contains(status.Convert(a.Err).Message(), "larger than max") {
					t.Fatalf("%s: %v, want grpc-go's RESOURCE_EXHAUSTED refusal", name, a.Err)
				}
				if len(a.Messages) != msgs || a.Replayed != replayed {
					t.Fatalf("%s: %d messages, replayed %v; want %d, %v", name, len(a.Messages), a.Replayed, msgs, replayed)
				}
				if a.Trailer.Get("x-after-the-end") != nil {
					t.Fatalf("%s: trailer %v carries what the handler set after the stream ended", name, a.Trailer)
				}
			}
			if mode == callerLeft {
				ctx, cancel := context.WithCancel(key)
				stream, err := c.StreamingOutputCall(ctx, req)
				if err == nil {
					_, err = stream.Recv()
				}
				cancel()
				if err != nil {
					t.Fatal(err)
				}
			} else {
				wantRefused("first call", streamtest.Output(key, c, req), 1, false)
			}
			<-finished
			if len(sendErrs) < 2 || sendErrs[0] != nil || status.Code(sendErrs[1]) != codes.ResourceExhausted {
				t.Fatalf("the handler's sends returned %v; want nil, then grpc-go's RESOURCE_EXHAUSTED", sendErrs)
			}
			if mode != returns && (len(sendErrs) != 3 || sendErrs[2] == nil) {
				t.Fatalf("the handler's sends returned %v; want the send after the refusal refused too", sendErrs)
			}
			if mode == returns {
				wantRefused("retry", streamtest.Output(key, c, req), 0, false)
				// grpc-go ends the stream before Send returns, so the caller
				// can have the refusal before the retry's release is observed.
				ev.Wait(t, idempotency.DecisionReleased, 2)
				if n := svc.runs.Load(); n != 2 || ev.Count(idempotency.DecisionReleased) != 2 {
					t.Fatalf("%d runs, %d releases; want the retry to run the handler again", n, ev.Count(idempotency.DecisionReleased))
				}
				return
			}
			wantRefused("retry", streamtest.Output(key, c, req), 1, true)
			wantRefused("retry resumed after 2", streamtest.Output(resumed(key, 2), c, req), 0, true)
			if n := svc.runs.Load(); n != 1 || ev.Count(idempotency.DecisionExecuted) != 1 {
				t.Fatalf("%d runs, %d executed; want one", n, ev.Count(idempotency.DecisionExecuted))
			}
		})
	}
}

// keepStreamCaller is keepCaller for streams: placed before the
// idempotency interceptor, it puts the caller's context in the stream's
// context's values.
func keepStreamCaller(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &ctxStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), callerKey{}, ss.Context())})
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// TestStreamLateHeaderRefused: a SetHeader after the stream's header went
// with its first message is refused, as grpc-go refuses it on a live
// stream, whether the caller is there or has left (detached, the handler
// goes on); so the replay never carries a header no live caller could
// have got. A SetHeader before the first message of a caller that has
// left is recorded and replayed (decision 58).
func TestStreamLateHeaderRefused(t *testing.T) {
	t.Parallel()
	const (
		stays       = iota
		leftAfter1  // after it received message 1
		leftBefore1 // before the first message
	)
	for _, when := range []int{stays, leftAfter1, leftBefore1} {
		t.Run([]string{"CallerStays", "CallerLeftAfterMessage1", "CallerLeftBeforeMessage1"}[when], func(t *testing.T) {
			t.Parallel()
			started, finished := make(chan struct{}), make(chan struct{})
			var lateErr, midErr error
			svc := &scripted{script: func(_ *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
				defer close(finished)
				caller := stream.Context().Value(callerKey{}).(context.Context)
				if err := stream.SetHeader(metadata.Pairs("x-early", "1")); err != nil {
					return err
				}
				close(started)
				if when == leftBefore1 {
					<-caller.Done()
					midErr = stream.SetHeader(metadata.Pairs("x-mid", "1"))
				}
				if err := stream.Send(message(0, 16)); err != nil {
					return err
				}
				if when == leftAfter1 {
					<-caller.Done()
				}
				lateErr = stream.SetHeader(metadata.Pairs("x-late", "1"))
				return stream.Send(message(1, 16))
			}}
			s := idempotency.NewServer(memStore(t), append(streamtest.Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired}),
				idempotency.WithWaitForInFlight(time.Minute))...)
			c := streamtest.Start(t, svc, nil, grpc.ChainStreamInterceptor(keepStreamCaller, s.StreamServerInterceptor()))
			key := withKey(t.Context(), "late")
			ctx, cancel := context.WithCancel(key)
			defer cancel()
			stream, err := c.StreamingOutputCall(ctx, streamtest.OutputRequest(2, 16))
			if err != nil {
				t.Fatal(err)
			}
			<-started
			switch when {
			case stays:
				for range 2 {
					if _, err := stream.Recv(); err != nil {
						t.Fatal(err)
					}
				}
				if h, _ := stream.Header(); h.Get("x-late") != nil || h.Get("x-early") == nil {
					t.Fatalf("live header %v; want x-early and not x-late", h)
				}
			case leftAfter1:
				if _, err := stream.Recv(); err != nil {
					t.Fatal(err)
				}
				cancel()
			case leftBefore1:
				cancel()
			}
			<-finished
			if lateErr == nil {
				t.Fatal("SetHeader after the first message returned nil; grpc-go refuses it on a live stream")
			}
			if when == leftBefore1 && midErr != nil {
				t.Fatalf("SetHeader before the first message of a caller that left: %v, want it recorded (decision 58)", midErr)
			}
			a := streamtest.Output(key, c, streamtest.OutputRequest(2, 16))
			if a.Err != nil || len(a.Messages) != 2 || !a.Replayed || svc.runs.Load() != 1 {
				t.Fatalf("retry: %d messages, replayed %v, %v, %d runs; want the stored 2", len(a.Messages), a.Replayed, a.Err, svc.runs.Load())
			}
			if a.Header.Get("x-late") != nil || a.Header.Get("x-early") == nil || (when == leftBefore1) != (a.Header.Get("x-mid") != nil) {
				t.Fatalf("replayed header %v; want x-early, x-mid only when set before message 1 of a caller that left, never x-late", a.Header)
			}
		})
	}
}
