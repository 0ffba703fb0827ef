package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestStreamCore runs the core stream cases over the memory store; the
// integration module runs them over Redis and PostgreSQL.
func TestStreamCore(t *testing.T) {
	t.Parallel()
	streamtest.RunCore(t, func(t *testing.T) store.Store { return memStore(t) })
}

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

// streamServer serves a fresh interop service behind a Server over st
// whose streaming methods are REQUIRED, with opts.
func streamServer(t *testing.T, st store.Store, opts ...idempotency.ServerOption) (*streamtest.Service, *events, func(context.Context, ...int) streamtest.Answer) {
	t.Helper()
	ev := &events{}
	opts = append(append(streamtest.Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired}), idempotency.WithObserver(ev)), opts...)
	svc := &streamtest.Service{}
	c := streamtest.Start(t, svc, idempotency.NewServer(st, opts...))
	output := func(ctx context.Context, shape ...int) streamtest.Answer {
		return streamtest.Output(ctx, c, streamtest.OutputRequest(shape[0], shape[1]))
	}
	return svc, ev, output
}

// TestStreamLeaseRenewal: the lease of a server stream that outlasts it is
// renewed while the handler sends, a duplicate meanwhile is refused as in
// flight, and the outcome is stored once the stream ends.
func TestStreamLeaseRenewal(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	svc, ev, output := streamServer(t, st, streamtest.Policies(idempotency.MethodPolicy{
		Mode: idempotency.ModeRequired, Lease: minLease})...)
	_, _, other := streamServer(t, st)
	release := make(chan struct{})
	svc.BeforeSend = func(_ context.Context, i int) {
		if i == 1 {
			<-release
		}
	}
	ctx := withKey(t.Context(), "long")
	var first streamtest.Answer
	var wg sync.WaitGroup
	wg.Go(func() { first = output(ctx, 3, 16) })
	ev.Wait(t, idempotency.DecisionLeaseRenewed, 3)
	dup := other(ctx, 3, 16)
	wantReason(t, dup.Err, codes.Aborted, idempotency.ErrKeyInUse.Reason)
	close(release)
	wg.Wait()
	if first.Err != nil || len(first.Messages) != 3 {
		t.Fatalf("long stream: %d messages, %v", len(first.Messages), first.Err)
	}
	if n := ev.Count(idempotency.DecisionLeaseLost); n != 0 {
		t.Fatalf("%d lease losses", n)
	}
	if again := output(ctx, 3, 16); !again.Replayed || len(again.Messages) != 3 || svc.Executions() != 1 {
		t.Fatalf("retry: replayed %v, %d messages, %d executions", again.Replayed, len(again.Messages), svc.Executions())
	}
}

// TestStreamOutcomeOverBound: a server stream larger than
// WithMaxResponseBytes reaches its caller whole, and its key is completed
// as not retained: a retry is refused, never run again.
func TestStreamOutcomeOverBound(t *testing.T) {
	t.Parallel()
	svc, ev, output := streamServer(t, memStore(t), idempotency.WithMaxResponseBytes(1000))
	ctx := withKey(t.Context(), "big")
	if first := output(ctx, 5, 300); first.Err != nil || len(first.Messages) != 5 {
		t.Fatalf("first call: %d messages, %v; want all 5", len(first.Messages), first.Err)
	}
	again := output(ctx, 5, 300)
	wantReason(t, again.Err, codes.FailedPrecondition, idempotency.ErrResponseNotRetained.Reason)
	if len(again.Messages) != 0 || !again.Replayed || svc.Executions() != 1 || ev.Count(idempotency.DecisionNotRetained) != 1 {
		t.Fatalf("retry: %d messages, replayed %v; %d executions", len(again.Messages), again.Replayed, svc.Executions())
	}
}

// TestClientStreamOverBound: a keyed client stream over
// WithMaxStreamRequestBytes is refused before its handler runs, and
// nothing is claimed: the key then serves a smaller stream.
func TestClientStreamOverBound(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	svc := &streamtest.Service{}
	c := streamtest.Start(t, svc, idempotency.NewServer(st, append(streamtest.Policies(idempotency.MethodPolicy{}),
		idempotency.WithMaxStreamRequestBytes(1000))...))
	ctx := withKey(t.Context(), "in")
	body := make([]byte, 300)
	_, _, err := streamtest.Input(ctx, c, body, body, body, body)
	wantReason(t, err, codes.InvalidArgument, idempotency.ErrStreamTooLarge.Reason)
	if n := svc.Executions(); n != 0 {
		t.Fatalf("handler ran %d times for a refused stream", n)
	}
	resp, header, err := streamtest.Input(ctx, c, body, body)
	if err != nil || resp.GetAggregatedPayloadSize() != 600 || idempotency.Replayed(header, nil) {
		t.Fatalf("smaller stream with the key: %v, %v, header %v; want it run", resp, err, header)
	}
}

// TestStreamRefusals: what a keyed stream is refused for, before its
// handler runs.
func TestStreamRefusals(t *testing.T) {
	t.Parallel()
	st := memStore(t)
	svc := &streamtest.Service{}
	c := streamtest.Start(t, svc, idempotency.NewServer(st, streamtest.Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired})...))
	ctx := withKey(t.Context(), "used")
	if a := streamtest.Output(ctx, c, streamtest.OutputRequest(1, 8)); a.Err != nil {
		t.Fatal(a.Err)
	}
	if _, _, err := streamtest.Input(ctx, c, []byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	resume := func(v ...string) context.Context {
		for _, s := range v {
			ctx = metadata.AppendToOutgoingContext(ctx, idempotency.ResumeAfterKey, s)
		}
		return ctx
	}
	cases := []struct {
		name   string
		call   func() error
		code   codes.Code
		reason string
	}{
		{"server stream without a key", func() error {
			return streamtest.Output(t.Context(), c, streamtest.OutputRequest(1, 8)).Err
		}, codes.InvalidArgument, idempotency.ErrKeyMissing.Reason},
		{"client stream without a key", func() error {
			_, _, err := streamtest.Input(t.Context(), c, []byte("a"))
			return err
		}, codes.InvalidArgument, idempotency.ErrKeyMissing.Reason},
		{"server stream, another request", func() error {
			return streamtest.Output(ctx, c, streamtest.OutputRequest(2, 8)).Err
		}, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason},
		{"client stream, messages in another order", func() error {
			_, _, err := streamtest.Input(ctx, c, []byte("b"), []byte("a"))
			return err
		}, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason},
		{"client stream, one message more", func() error {
			_, _, err := streamtest.Input(ctx, c, []byte("a"), []byte("b"), []byte("c"))
			return err
		}, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason},
		{"resume not a number", func() error {
			return streamtest.Output(resume("two"), c, streamtest.OutputRequest(1, 8)).Err
		}, codes.InvalidArgument, idempotency.ErrResumeInvalid.Reason},
		{"resume negative", func() error {
			return streamtest.Output(resume("-1"), c, streamtest.OutputRequest(1, 8)).Err
		}, codes.InvalidArgument, idempotency.ErrResumeInvalid.Reason},
		{"resume twice", func() error {
			return streamtest.Output(resume("1", "2"), c, streamtest.OutputRequest(1, 8)).Err
		}, codes.InvalidArgument, idempotency.ErrResumeInvalid.Reason},
	}
	for _, tc := range cases {
		wantReason(t, tc.call(), tc.code, tc.reason)
	}
	if n := svc.Executions(); n != 2 {
		t.Fatalf("handlers ran %d times, want the two first calls only", n)
	}
}

// TestBidiPolicyIsConfigError: a policy on a bidirectional streaming
// method cannot work; NewServer panics naming the method.
func TestBidiPolicyIsConfigError(t *testing.T) {
	t.Parallel()
	defer func() {
		var ce *idempotency.MethodConfigError
		err, _ := recover().(error)
		if !errors.As(err, &ce) || ce.Method != streamtest.DuplexMethod || !strings.Contains(ce.Problem, "bidirectional") {
			t.Fatalf("panic %v, want a MethodConfigError for %s", err, streamtest.DuplexMethod)
		}
	}()
	idempotency.NewServer(memStore(t), idempotency.WithMethodPolicy(streamtest.DuplexMethod, idempotency.MethodPolicy{}))
}

// TestValidateStreams: Server.Validate accepts policies on the interop
// service's client- and server-streaming methods.
func TestValidateStreams(t *testing.T) {
	t.Parallel()
	s := idempotency.NewServer(memStore(t), streamtest.Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired})...)
	gs := testserver.Start(t, func(r grpc.ServiceRegistrar) {
		testgrpc.RegisterTestServiceServer(r, &streamtest.Service{})
	}, grpc.StreamInterceptor(s.StreamServerInterceptor())).GRPC
	if err := s.Validate(gs); err != nil {
		t.Fatal(err)
	}
}

// TestValidateWithoutStreamInterceptor: a Server whose stream interceptor
// was never built reports each annotated client- or server-streaming
// method it serves, so that no annotation is silently ignored; once the
// interceptor is built, only the annotated bidirectional method remains.
func TestValidateWithoutStreamInterceptor(t *testing.T) {
	t.Parallel()
	s := idempotency.NewServer(memStore(t), streamtest.Policies(idempotency.MethodPolicy{})...)
	gs := testserver.Start(t, func(r grpc.ServiceRegistrar) {
		testingv1.RegisterStreamServiceServer(r, &streamtest.Streams{})
		testgrpc.RegisterTestServiceServer(r, &streamtest.Service{})
	}, grpc.UnaryInterceptor(s.UnaryServerInterceptor())).GRPC
	problems := func() map[string]string {
		got := map[string]string{}
		var ce *idempotency.MethodConfigError
		for _, err := range unjoin(s.Validate(gs)) {
			if !errors.As(err, &ce) {
				t.Fatalf("Validate: %v, not a MethodConfigError", err)
			}
			got[ce.Method] = ce.Problem
		}
		return got
	}
	got := problems()
	for _, m := range []string{streamtest.UploadMethod, streamtest.DownloadMethod, streamtest.InputMethod, streamtest.OutputMethod} {
		if !strings.Contains(got[m], "no stream interceptor") {
			t.Errorf("%s: %q, want the missing stream interceptor reported", m, got[m])
		}
	}
	if !strings.Contains(got[streamtest.ChatMethod], "bidirectional") || len(got) != 5 {
		t.Fatalf("Validate reported %v; want the four streaming methods and Chat", got)
	}
	s.StreamServerInterceptor()
	if got := problems(); len(got) != 1 || got[streamtest.ChatMethod] == "" {
		t.Fatalf("with the stream interceptor, Validate reported %v; want Chat only", got)
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}

// streamsServer serves the StreamService behind a Server over st with
// opts, for plain clients (no client interceptor).
func streamsServer(t *testing.T, st *faultstore.Store, opts ...idempotency.ServerOption) (*streamtest.Streams, *events, testingv1.StreamServiceClient) {
	t.Helper()
	ev := &events{}
	svc := &streamtest.Streams{}
	cc, _ := streamtest.Proxied(t, svc, idempotency.NewServer(st, append([]idempotency.ServerOption{idempotency.WithObserver(ev)}, opts...)...))
	return svc, ev, testingv1.NewStreamServiceClient(cc)
}

// download reads a whole Download answer.
func download(ctx context.Context, c testingv1.StreamServiceClient, req *testingv1.DoRequest, opts ...grpc.CallOption) ([]*testingv1.DoResponse, metadata.MD, error) {
	stream, err := c.Download(ctx, req, opts...)
	if err != nil {
		return nil, nil, err
	}
	var msgs []*testingv1.DoResponse
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			h, _ := stream.Header()
			return msgs, h, nil
		}
		if err != nil {
			return msgs, nil, err
		}
		msgs = append(msgs, m)
	}
}

// TestStreamGaps: an annotated bidirectional call fails closed; streams
// fail open with WithFailOpen; a server stream's key comes from its
// request's key_field; the observer sees a client stream over the bound
// and an invalid resume value.
func TestStreamGaps(t *testing.T) {
	t.Parallel()
	t.Run("BidiFailsClosed", func(t *testing.T) {
		t.Parallel()
		svc, ev, c := streamsServer(t, faultstore.New(memStore(t)))
		stream, err := c.Chat(withKey(t.Context(), "chat"))
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(&testingv1.DoRequest{Payload: "hi"})
		_, err = stream.Recv()
		wantReason(t, err, codes.Internal, idempotency.ErrMisconfigured.Reason)
		if svc.Executions() != 0 || ev.Count(idempotency.DecisionMisconfigured) != 1 {
			t.Fatalf("%d executions, %d misconfigured events; want 0 and 1", svc.Executions(), ev.Count(idempotency.DecisionMisconfigured))
		}
	})
	t.Run("FailOpen", func(t *testing.T) {
		t.Parallel()
		st := faultstore.New(memStore(t))
		st.Down.Store(true)
		svc, ev, c := streamsServer(t, st, idempotency.WithFailOpen())
		ctx := withKey(t.Context(), "open")
		msgs, _, err := download(ctx, c, &testingv1.DoRequest{Amount: 3})
		if err != nil || len(msgs) != 3 {
			t.Fatalf("download with the store down: %d messages, %v", len(msgs), err)
		}
		resp, err := upload(ctx, c, []int64{1, 2})
		if err != nil || resp.GetAmount() != 3 {
			t.Fatalf("upload with the store down: %v, %v", resp, err)
		}
		if svc.Executions() != 2 || ev.Count(idempotency.DecisionFailOpen) != 2 {
			t.Fatalf("%d executions, %d fail-open events; want 2 and 2", svc.Executions(), ev.Count(idempotency.DecisionFailOpen))
		}
	})
	t.Run("KeyField", func(t *testing.T) {
		t.Parallel()
		svc, _, c := streamsServer(t, faultstore.New(memStore(t)))
		req := &testingv1.DoRequest{Amount: 2, RequestId: "from-the-field"}
		first, h1, err1 := download(t.Context(), c, req)
		again, h2, err2 := download(t.Context(), c, req)
		if err1 != nil || err2 != nil || len(first) != 2 || len(again) != 2 || svc.Executions() != 1 {
			t.Fatalf("two downloads with request_id: %v, %v, %d executions", err1, err2, svc.Executions())
		}
		if idempotency.Replayed(h1, nil) || !idempotency.Replayed(h2, nil) {
			t.Fatalf("headers %v, %v; want the second replayed", h1, h2)
		}
		_, _, err := download(t.Context(), c, &testingv1.DoRequest{Amount: 2})
		wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyMissing.Reason)
	})
	t.Run("ObserverDecisions", func(t *testing.T) {
		t.Parallel()
		svc, ev, c := streamsServer(t, faultstore.New(memStore(t)), idempotency.WithMaxStreamRequestBytes(20))
		ctx := withKey(t.Context(), "observed")
		_, err := upload(ctx, c, []int64{1, 2, 3, 4})
		wantReason(t, err, codes.InvalidArgument, idempotency.ErrStreamTooLarge.Reason)
		rctx := metadata.AppendToOutgoingContext(ctx, idempotency.ResumeAfterKey, "-1")
		_, _, err = download(rctx, c, &testingv1.DoRequest{Amount: 1})
		wantReason(t, err, codes.InvalidArgument, idempotency.ErrResumeInvalid.Reason)
		if svc.Executions() != 0 || ev.Count(idempotency.DecisionStreamTooLarge) != 1 || ev.Count(idempotency.DecisionResumeInvalid) != 1 {
			t.Fatalf("%d executions; events %d stream_too_large, %d resume_invalid; want 0, 1, 1",
				svc.Executions(), ev.Count(idempotency.DecisionStreamTooLarge), ev.Count(idempotency.DecisionResumeInvalid))
		}
		if a, b := idempotency.DecisionStreamTooLarge.String(), idempotency.DecisionResumeInvalid.String(); a != "stream_too_large" || b != "resume_invalid" {
			t.Fatalf("decision names %q, %q", a, b)
		}
	})
}

// TestStreamResumeFailOpen: with the store down and WithFailOpen, a server
// stream's retry runs the handler without a claim and still sends only
// the messages after those the caller has (idempotency-resume-after), so
// the caller of the stream client interceptor gets each of its five
// messages once, and a manual retry resumed after 2 gets three.
func TestStreamResumeFailOpen(t *testing.T) {
	t.Parallel()
	t.Run("ClientRetry", func(t *testing.T) {
		t.Parallel()
		const n, k = 5, 2
		st := faultstore.New(memStore(t))
		svc := &streamtest.Streams{}
		s := idempotency.NewServer(st, idempotency.WithFailOpen(), idempotency.WithStoreTimeout(100*time.Millisecond))
		cc, proxy := streamtest.Proxied(t, svc, s, grpc.WithChainStreamInterceptor(idempotency.StreamClientInterceptor(
			idempotency.WithMaxAttempts(5),
			idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 10 * time.Millisecond }))))
		atK, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		svc.BeforeSend = func(_ context.Context, i int) {
			if i == k && svc.Executions() == 1 {
				once.Do(func() { close(atK) })
				<-release
			}
		}
		stream, err := testingv1.NewStreamServiceClient(cc).Download(t.Context(), &testingv1.DoRequest{Payload: "d", Amount: n}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatal(err)
		}
		var got []*testingv1.DoResponse
		for {
			if len(got) == k {
				<-atK
				st.Down.Store(true)
				proxy.CutAll()
				close(release)
			}
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("after %d messages: %v", len(got), err)
			}
			got = append(got, m)
		}
		wantSequence(t, got, n)
		if e := svc.Executions(); e != 2 {
			t.Fatalf("%d executions, want the claimed one and the fail-open retry's", e)
		}
	})
	t.Run("ManualRetry", func(t *testing.T) {
		t.Parallel()
		st := faultstore.New(memStore(t))
		st.Down.Store(true)
		svc, ev, c := streamsServer(t, st, idempotency.WithFailOpen())
		msgs, _, err := download(resumed(withKey(t.Context(), "open"), 2), c, &testingv1.DoRequest{Amount: 5})
		if err != nil || len(msgs) != 3 || msgs[0].GetAmount() != 2 {
			t.Fatalf("resumed after 2 with the store down: %d messages (first %v), %v; want messages 2 to 4", len(msgs), msgs, err)
		}
		if svc.Executions() != 1 || ev.Count(idempotency.DecisionFailOpen) != 1 {
			t.Fatalf("%d executions, %d fail-open events; want 1 and 1", svc.Executions(), ev.Count(idempotency.DecisionFailOpen))
		}
	})
}

// outputIndexes returns the index of each message of an interop stream,
// as its body says ("e<execution> m<index> ").
func outputIndexes(t *testing.T, a streamtest.Answer) []int {
	t.Helper()
	var out []int
	for _, b := range a.Messages {
		m := &testgrpc.StreamingOutputCallResponse{}
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		var e, i int
		if _, err := fmt.Sscanf(strings.TrimRight(string(m.GetPayload().GetBody()), "\x00"), "e%d m%d ", &e, &i); err != nil {
			t.Fatalf("message body %q: %v", m.GetPayload().GetBody(), err)
		}
		out = append(out, i)
	}
	return out
}

// TestStreamResumeNested: a server stream through two idempotency stream
// interceptors over one store honours the resume point once: the outer
// one, which runs the handler under its claim (the inner one passing it
// through) or without one (both failing open), sends messages N+1
// onwards; the inner one does not skip them again.
func TestStreamResumeNested(t *testing.T) {
	t.Parallel()
	for _, down := range []bool{false, true} {
		t.Run(map[bool]string{false: "Claimed", true: "FailOpen"}[down], func(t *testing.T) {
			t.Parallel()
			st := faultstore.New(memStore(t))
			st.Down.Store(down)
			opts := append(streamtest.Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired}), idempotency.WithFailOpen())
			outer, inner := idempotency.NewServer(st, opts...), idempotency.NewServer(st, opts...)
			svc := &streamtest.Service{}
			c := streamtest.Start(t, svc, nil, grpc.ChainStreamInterceptor(outer.StreamServerInterceptor(), inner.StreamServerInterceptor()))
			ctx := withKey(t.Context(), "nested")
			a := streamtest.Output(resumed(ctx, 2), c, streamtest.OutputRequest(5, 16))
			if got := outputIndexes(t, a); a.Err != nil || fmt.Sprint(got) != "[2 3 4]" || svc.Executions() != 1 {
				t.Fatalf("resumed after 2: messages %v, %v, %d executions; want [2 3 4] from one", got, a.Err, svc.Executions())
			}
			if down {
				return
			}
			a = streamtest.Output(ctx, c, streamtest.OutputRequest(5, 16))
			if got := outputIndexes(t, a); a.Err != nil || fmt.Sprint(got) != "[0 1 2 3 4]" || !a.Replayed || svc.Executions() != 1 {
				t.Fatalf("retry: messages %v, replayed %v, %v; want all 5 replayed", got, a.Replayed, a.Err)
			}
		})
	}
}
