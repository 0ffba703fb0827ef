package otelidempotency_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
)

// telemetry is a real OpenTelemetry SDK pipeline: a manual metric reader
// and an in-memory span recorder.
type telemetry struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	tel := &telemetry{
		reader: reader,
		mp:     sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		spans:  spans,
		tp:     sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
	}
	t.Cleanup(func() {
		_ = tel.mp.Shutdown(context.Background())
		_ = tel.tp.Shutdown(context.Background())
	})
	return tel
}

// server is the test service on bufconn ([testkit.Serve]) behind
// otelgrpc's server stats handler and the idempotency interceptor with the
// observer under test, over a memory store wrapped in a fault store.
type server struct {
	*testserver.Server
	tel   *telemetry
	store *faultstore.Store
}

func newServer(t *testing.T, h testserver.HandlerFunc, opts ...idempotency.ServerOption) *server {
	t.Helper()
	return newServerWith(t, h, nil, opts...)
}

// newServerWith is newServer with more options for otelgrpc's server stats
// handler, which records to the server's tracer provider.
func newServerWith(t *testing.T, h testserver.HandlerFunc, handler []otelgrpc.Option, opts ...idempotency.ServerOption) *server {
	t.Helper()
	tel := newTelemetry(t)
	opts = append([]idempotency.ServerOption{
		idempotency.WithObserver(otelidempotency.NewObserver(otelidempotency.WithMeterProvider(tel.mp))),
	}, opts...)
	r := testkit.Serve(t, testkit.Config{Handler: h, Options: opts, ServerOptions: []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(append(handler, otelgrpc.WithTracerProvider(tel.tp))...)),
	}})
	return &server{Server: r.Server, tel: tel, store: r.Faults}
}

var withKey = testkit.WithKey

// counter returns the decision counter's value for method and outcome.
func (tel *telemetry) counter(t *testing.T, method string, o idempotency.Decision) int64 {
	t.Helper()
	var n int64
	if sum, ok := tel.metric(t, otelidempotency.DecisionsMetric).Data.(metricdata.Sum[int64]); ok {
		for _, dp := range sum.DataPoints {
			if matches(dp.Attributes, method, o) {
				n += dp.Value
			}
		}
	}
	return n
}

// histogram returns the store histogram's count and sum for method and
// outcome.
func (tel *telemetry) histogram(t *testing.T, method string, o idempotency.Decision) (uint64, float64) {
	t.Helper()
	var count uint64
	var sum float64
	if h, ok := tel.metric(t, otelidempotency.StoreDurationMetric).Data.(metricdata.Histogram[float64]); ok {
		for _, dp := range h.DataPoints {
			if matches(dp.Attributes, method, o) {
				count += dp.Count
				sum += dp.Sum
			}
		}
	}
	return count, sum
}

// metric collects and returns the named metric, or an empty one.
func (tel *telemetry) metric(t *testing.T, name string) metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				if sm.Scope.Name != otelidempotency.ScopeName {
					t.Errorf("%s is in scope %q, want %q", name, sm.Scope.Name, otelidempotency.ScopeName)
				}
				return m
			}
		}
	}
	return metricdata.Metrics{}
}

// matches reports whether set names method (rpc.method, fully qualified as
// otelgrpc names it by default) and outcome.
func matches(set attribute.Set, method string, o idempotency.Decision) bool {
	m, _ := set.Value("rpc.method")
	sys, _ := set.Value("rpc.system.name")
	out, _ := set.Value(otelidempotency.OutcomeKey)
	return "/"+m.AsString() == method && sys.AsString() == "grpc" && out.AsString() == o.String()
}

// waitSpans waits until n spans named name have ended and returns them:
// a server span ends after the client has its answer.
func (tel *telemetry) waitSpans(t *testing.T, name string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	wait.For(t, func() bool {
		got = got[:0]
		for _, s := range tel.spans.Ended() {
			if s.Name() == name {
				got = append(got, s)
			}
		}
		return len(got) >= n
	})
	return got
}

// serverSpanName is otelgrpc's span name for a method of the test service.
func serverSpanName(method string) string { return method[1:] }

// attr returns the span's value of key, and whether it has one.
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// eventNames returns the names of the span's events, in order.
func eventNames(s sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	return names
}

// spanWithOutcome returns the one span whose outcome attribute is o.
func spanWithOutcome(t *testing.T, spans []sdktrace.ReadOnlySpan, o idempotency.Decision) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if v, ok := attr(s, otelidempotency.OutcomeKey); ok && v.AsString() == o.String() {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans with outcome %s, want 1", len(found), o)
	}
	if found[0].SpanKind() != trace.SpanKindServer {
		t.Fatalf("outcome %s on a %s span, want otelgrpc's server span", o, found[0].SpanKind())
	}
	return found[0]
}

var requiredMethod = testingv1.TestService_Required_FullMethodName
