package otelidempotency_test

import (
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
)

// otelgrpc carries the trace to the server with the propagator it is
// given: with one, the server span is a child of the client's attempt span;
// with none and the global one unset (a no-op), it is the root of a trace of
// its own. No case sets the global propagator, so that tests can run in
// parallel.
func TestServerSpanJoinsClientTrace(t *testing.T) {
	t.Parallel()
	if f := otel.GetTextMapPropagator().Fields(); len(f) != 0 {
		t.Fatalf("the global propagator injects %v; this test needs it unset", f)
	}
	tests := []struct {
		name    string
		handler []otelgrpc.Option // on both stats handlers
		joined  bool
	}{
		{name: "WithPropagators on both handlers", handler: []otelgrpc.Option{otelgrpc.WithPropagators(propagation.TraceContext{})}, joined: true},
		{name: "global propagator unset", joined: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServerWith(t, testserver.Echo, tt.handler)
			client := testingv1.NewTestServiceClient(s.Dial(t,
				grpc.WithStatsHandler(otelgrpc.NewClientHandler(append(tt.handler, otelgrpc.WithTracerProvider(s.tel.tp))...)),
				grpc.WithChainUnaryInterceptor(
					otelidempotency.UnaryClientInterceptor(otelidempotency.WithTracerProvider(s.tel.tp)),
					idempotency.UnaryClientInterceptor(),
				)))
			if _, err := client.Required(t.Context(), &testingv1.DoRequest{Payload: "a"}, idempotency.WithKey("k")); err != nil {
				t.Fatal(err)
			}

			call := s.tel.waitSpans(t, callSpan, 1)[0]
			// The client's attempt span and the server span share a name.
			srv := spanWithOutcome(t, s.tel.waitSpans(t, serverSpanName(requiredMethod), 2), idempotency.DecisionExecuted)
			attempts := attemptSpans(s.tel, call)
			if len(attempts) != 1 {
				t.Fatalf("%d attempt spans under the call span, want 1", len(attempts))
			}
			sameTrace := srv.SpanContext().TraceID() == call.SpanContext().TraceID()
			parent := srv.Parent()
			if tt.joined {
				if !sameTrace || parent.SpanID() != attempts[0].SpanContext().SpanID() || !parent.IsRemote() {
					t.Errorf("server span in trace %s with parent %s (remote %t); want trace %s, remote parent %s (the attempt span)",
						srv.SpanContext().TraceID(), parent.SpanID(), parent.IsRemote(), call.SpanContext().TraceID(), attempts[0].SpanContext().SpanID())
				}
			} else if sameTrace || parent.IsValid() {
				t.Errorf("server span in trace %s with parent %s; want a root span in a trace other than the call's %s",
					srv.SpanContext().TraceID(), parent.SpanID(), call.SpanContext().TraceID())
			}
		})
	}
}
