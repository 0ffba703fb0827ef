package otelidempotency_test

import (
	"context"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
)

// BenchmarkObserve is the cost of one decision (executed: a counter, a
// histogram point and the span attributes: the outcome, the operation and
// the store key): a bare ObserverFunc as the baseline, the observer with a
// no-op MeterProvider and no span, and the observer on the SDK with a
// recording span.
func BenchmarkObserve(b *testing.B) {
	e := idempotency.Event{
		Method: requiredMethod, Operation: requiredMethod, StoreKey: "EgIKgTLfyIIfXR5Dd81GlDb3QGuJSXyqIafLHwERAsA", Key: "k",
		Decision: idempotency.DecisionExecuted, StoreTime: 300 * time.Microsecond,
	}
	sdkMeter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() {
		_ = sdkMeter.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	spanCtx, span := tp.Tracer("bench").Start(context.Background(), "call")
	defer span.End()
	bench := []struct {
		name     string
		observer idempotency.Observer
		ctx      context.Context
	}{
		{"bare", idempotency.ObserverFunc(func(context.Context, idempotency.Event) {}), context.Background()},
		{"otel/noop", otelidempotency.NewObserver(otelidempotency.WithMeterProvider(metricnoop.NewMeterProvider())), context.Background()},
		{"otel/sdk", otelidempotency.NewObserver(otelidempotency.WithMeterProvider(sdkMeter)), spanCtx},
	}
	for _, bb := range bench {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bb.observer.Observe(bb.ctx, e)
			}
		})
	}
}
