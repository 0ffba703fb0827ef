package otelidempotency_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
)

const callSpan = "Sent.idempotency.testing.v1.TestService.Required"

// The call span counts the attempts the idempotency client interceptor
// sends and says why each retry was made; otelgrpc's attempt spans are its
// children.
func TestClientCallSpan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		setup    func(t *testing.T, s *server) // runs before the call
		payload  string
		code     grpccodes.Code
		attempts int      // 0: at least two
		reasons  []string // of each retry; nil with attempts 0: every retry IDEMPOTENCY_KEY_IN_USE
	}{
		{name: "one attempt", payload: "a", code: grpccodes.OK, attempts: 1},
		{name: "unavailable, then replayed", payload: "unavailable-once", code: grpccodes.OK, attempts: 2, reasons: []string{"UNAVAILABLE"}},
		{name: "in use, then replayed", setup: holdKey, payload: "slow", code: grpccodes.OK},
		{
			name: "reused key is not retried",
			setup: func(t *testing.T, s *server) {
				mustCall(t, s, "k", "other")
			},
			payload: "a", code: grpccodes.FailedPrecondition, attempts: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var failed atomic.Bool
			s := newServer(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				switch {
				case req.GetPayload() == "unavailable-once" && failed.CompareAndSwap(false, true):
					return nil, status.Error(grpccodes.Unavailable, "try again")
				case req.GetPayload() == "slow":
					time.Sleep(150 * time.Millisecond)
				}
				return testserver.Echo(ctx, m, req)
			}, idempotency.WithRetryAfter(20*time.Millisecond))
			if tt.setup != nil {
				tt.setup(t, s)
			}
			client := testingv1.NewTestServiceClient(s.Dial(t,
				grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(s.tel.tp))),
				grpc.WithChainUnaryInterceptor(
					otelidempotency.UnaryClientInterceptor(otelidempotency.WithTracerProvider(s.tel.tp)),
					idempotency.UnaryClientInterceptor(idempotency.WithBackoff(nil), idempotency.WithMaxAttempts(20)),
				)))
			_, err := client.Required(t.Context(), &testingv1.DoRequest{Payload: tt.payload}, idempotency.WithKey("k"))
			if got := status.Code(err); got != tt.code {
				t.Fatalf("call: %v, want %v", err, tt.code)
			}

			span := s.tel.waitSpans(t, callSpan, 1)[0]
			attempts := checkAttempts(t, span, tt.attempts)
			checkRetries(t, span, attempts, tt.reasons)
			checkStatus(t, span, tt.code)
			if n := len(attemptSpans(s.tel, span)); n != attempts {
				t.Errorf("%d otelgrpc client spans under the call span, want %d", n, attempts)
			}
		})
	}
}

// holdKey starts a slow call with key "k" and returns once its handler
// runs, so that the same call under test finds the key in use.
func holdKey(t *testing.T, s *server) {
	t.Helper()
	client := s.Client(t)
	done := make(chan error, 1)
	go func() {
		// Not t.Context(): the cleanup below waits for this call after it is cancelled.
		_, err := client.Required(withKey(context.WithoutCancel(t.Context()), "k"), &testingv1.DoRequest{Payload: "slow"})
		done <- err
	}()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("the call holding the key: %v", err)
		}
	})
	s.Service.WaitExecutions(t, 1)
}

// checkAttempts checks the attempts attribute against want (0: at least
// two) and returns it.
func checkAttempts(t *testing.T, span sdktrace.ReadOnlySpan, want int) int {
	t.Helper()
	v, ok := attr(span, otelidempotency.AttemptsKey)
	got := int(v.AsInt64())
	switch {
	case !ok:
		t.Fatalf("call span has no %s", otelidempotency.AttemptsKey)
	case want == 0 && got < 2, want != 0 && got != want:
		t.Fatalf("%s = %d, want %d (0: at least 2)", otelidempotency.AttemptsKey, got, want)
	}
	return got
}

// checkRetries checks one retry event per attempt but the last, numbered in
// order, with the given reasons (nil: each IDEMPOTENCY_KEY_IN_USE).
func checkRetries(t *testing.T, span sdktrace.ReadOnlySpan, attempts int, reasons []string) {
	t.Helper()
	events := span.Events()
	if len(events) != attempts-1 {
		t.Fatalf("%d events, want %d (one per retry): %v", len(events), attempts-1, eventNames(span))
	}
	for i, e := range events {
		want := idempotency.ErrKeyInUse.Reason
		if reasons != nil {
			want = reasons[i]
		}
		got := map[string]string{}
		var attempt int64
		for _, kv := range e.Attributes {
			if kv.Key == otelidempotency.AttemptKey {
				attempt = kv.Value.AsInt64()
			}
			got[string(kv.Key)] = kv.Value.String()
		}
		if e.Name != otelidempotency.RetryEvent || attempt != int64(i+1) || got[string(otelidempotency.RetryReasonKey)] != want {
			t.Errorf("event %d: %s %v, want %s with attempt %d, reason %s", i, e.Name, got, otelidempotency.RetryEvent, i+1, want)
		}
	}
}

func checkStatus(t *testing.T, span sdktrace.ReadOnlySpan, code grpccodes.Code) {
	t.Helper()
	wantName := map[grpccodes.Code]string{grpccodes.OK: "OK", grpccodes.FailedPrecondition: "FAILED_PRECONDITION"}[code]
	if v, _ := attr(span, "rpc.response.status_code"); v.AsString() != wantName {
		t.Errorf("rpc.response.status_code = %q, want %q", v.AsString(), wantName)
	}
	if m, _ := attr(span, "rpc.method"); m.AsString() != requiredMethod[1:] {
		t.Errorf("rpc.method = %q, want %q", m.AsString(), requiredMethod[1:])
	}
	wantStatus := codes.Unset
	if code != grpccodes.OK {
		wantStatus = codes.Error
	}
	if span.Status().Code != wantStatus || span.SpanKind() != trace.SpanKindInternal {
		t.Errorf("call span status %v, kind %v; want %v, internal", span.Status().Code, span.SpanKind(), wantStatus)
	}
}

// attemptSpans returns otelgrpc's client spans whose parent is the call
// span.
func attemptSpans(tel *telemetry, call sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if s.SpanKind() == trace.SpanKindClient && s.Parent().SpanID() == call.SpanContext().SpanID() {
			out = append(out, s)
		}
	}
	return out
}
