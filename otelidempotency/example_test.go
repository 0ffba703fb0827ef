package otelidempotency_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// The observer on a server instrumented with otelgrpc, and the call span
// on its client. A call and its retry: the retry is replayed, and both
// show on the metrics and spans.
func ExampleNewObserver() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))

	store := memorystore.New()
	defer store.Close()
	srv := grpc.NewServer(
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp))),
		grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(store,
			idempotency.WithObserver(otelidempotency.NewObserver(otelidempotency.WithMeterProvider(mp))),
		)),
	)
	testingv1.RegisterTestServiceServer(srv, &testserver.Service{})
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()

	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp))),
		grpc.WithChainUnaryInterceptor(
			otelidempotency.UnaryClientInterceptor(otelidempotency.WithTracerProvider(tp)),
			idempotency.UnaryClientInterceptor(),
		))
	if err != nil {
		log.Fatal(err)
	}
	client := testingv1.NewTestServiceClient(conn)
	for range 2 {
		if _, err := client.Required(context.Background(), &testingv1.DoRequest{Amount: 42}, idempotency.WithKey("charge-42")); err != nil {
			log.Fatal(err)
		}
	}
	_ = conn.Close()
	srv.GracefulStop() // the server spans end

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == otelidempotency.DecisionsMetric {
				for _, dp := range sum.DataPoints {
					outcome, _ := dp.Attributes.Value(otelidempotency.OutcomeKey)
					method, _ := dp.Attributes.Value("rpc.method")
					fmt.Printf("%s{rpc.method=%s, idempotency.outcome=%s} %d\n", m.Name, method.AsString(), outcome.AsString(), dp.Value)
				}
			}
		}
	}
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == otelidempotency.OutcomeKey || kv.Key == otelidempotency.AttemptsKey {
				fmt.Printf("span %s (%s): %s=%s, events %d\n", s.Name(), s.SpanKind(), kv.Key, kv.Value.String(), len(s.Events()))
			}
		}
	}
	// Unordered output:
	// idempotency.server.decisions{rpc.method=idempotency.testing.v1.TestService/Required, idempotency.outcome=executed} 1
	// idempotency.server.decisions{rpc.method=idempotency.testing.v1.TestService/Required, idempotency.outcome=replayed} 1
	// span idempotency.testing.v1.TestService/Required (server): idempotency.outcome=executed, events 0
	// span idempotency.testing.v1.TestService/Required (server): idempotency.outcome=replayed, events 1
	// span Sent.idempotency.testing.v1.TestService.Required (internal): idempotency.attempts=1, events 0
	// span Sent.idempotency.testing.v1.TestService.Required (internal): idempotency.attempts=1, events 0
}

// The store gauges over a memory store holding one outcome and one call
// in flight, collected by a reader; a server reports them once per store
// (every server over a shared store would report the same figures).
func ExampleRegisterStoreMetrics() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	st := memorystore.New()
	defer st.Close()
	reg, err := otelidempotency.RegisterStoreMetrics(st, otelidempotency.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()

	ctx := context.Background()
	done, _ := st.Claim(ctx, "done", []byte("fp"), time.Minute, store.ClaimOptions{})
	_ = st.Complete(ctx, "done", done.Token, []byte("outcome"), time.Hour)
	_, _ = st.Claim(ctx, "running", []byte("fp"), time.Minute, store.ClaimOptions{})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == otelidempotency.StoreEntriesMetric {
				for _, dp := range g.DataPoints {
					state, _ := dp.Attributes.Value(otelidempotency.StateKey)
					est, _ := dp.Attributes.Value(otelidempotency.EstimatedKey)
					fmt.Printf("%s{idempotency.state=%s, idempotency.estimated=%v} %d\n", m.Name, state.AsString(), est.AsBool(), dp.Value)
				}
			}
		}
	}
	// Unordered output:
	// idempotency.store.entries{idempotency.state=in_flight, idempotency.estimated=false} 1
	// idempotency.store.entries{idempotency.state=abandoned, idempotency.estimated=false} 0
	// idempotency.store.entries{idempotency.state=completed, idempotency.estimated=false} 1
}
