package idempotency_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/streamtest"
)

// TestValidateWithoutStreamInterceptor: a Server whose stream interceptor
// was never built reports each annotated client- or server-streaming
// method it serves, so that no annotation is silently ignored; once the
// interceptor is built, only the annotated bidirectional method remains.
func TestValidateWithoutStreamInterceptor(t *testing.T) {
	t.Parallel()
	s := idempotency.NewServer(memStore(t), streamtest.Policies(idempotency.MethodPolicy{})...)
	gs := grpc.NewServer(grpc.UnaryInterceptor(s.UnaryServerInterceptor()))
	testingv1.RegisterStreamServiceServer(gs, &streamtest.Streams{})
	testgrpc.RegisterTestServiceServer(gs, &streamtest.Service{})
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
