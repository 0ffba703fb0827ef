package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/streamtest"
	"github.com/grpc-idempotency/idempotency/store"
)

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
	gs := grpc.NewServer(grpc.StreamInterceptor(s.StreamServerInterceptor()))
	testgrpc.RegisterTestServiceServer(gs, &streamtest.Service{})
	if err := s.Validate(gs); err != nil {
		t.Fatal(err)
	}
}
