package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
)

// metricInterval is how often -otel prints the metrics in the server
// modes; they are printed once more when the server stops.
const metricInterval = 30 * time.Second

// telemetry is the OpenTelemetry SDK that -otel sets up: spans and metrics
// written as JSON lines by the SDK's stdout exporters. The providers are
// passed to the instrumentation explicitly; nothing global is set.
type telemetry struct {
	tp *sdktrace.TracerProvider
	mp *sdkmetric.MeterProvider
}

// newTelemetry writes each span to spans as it ends, and the metrics to
// metrics every interval and at shutdown.
func newTelemetry(spans, metrics io.Writer, interval time.Duration) (*telemetry, error) {
	res := resource.NewSchemaless(semconv.ServiceName("payments"))
	spanExporter, err := stdouttrace.New(stdouttrace.WithWriter(spans))
	if err != nil {
		return nil, err
	}
	metricExporter, err := stdoutmetric.New(stdoutmetric.WithWriter(metrics))
	if err != nil {
		return nil, err
	}
	return &telemetry{
		tp: sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSyncer(spanExporter)),
		mp: sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
			sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metricExporter, sdkmetric.WithInterval(interval)))),
	}, nil
}

// shutdown writes what is left and stops the providers.
func (t *telemetry) shutdown(ctx context.Context) error {
	return errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
}

// propagators carry the trace from the client's attempt spans to the
// server's spans (W3C Trace Context).
var propagators = propagation.TraceContext{}

// serverHandler is otelgrpc's server stats handler on t's providers.
func (t *telemetry) serverHandler() stats.Handler {
	return otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(t.tp), otelgrpc.WithMeterProvider(t.mp),
		otelgrpc.WithPropagators(propagators))
}

// observer is the idempotency observer that records on t's meter and on
// otelgrpc's server span.
func (t *telemetry) observer() idempotency.Observer {
	return otelidempotency.NewObserver(otelidempotency.WithMeterProvider(t.mp))
}

// dialOptions instrument a client: otelgrpc's attempt spans, under one call
// span per logical call that counts the attempts. The call-span
// interceptor goes before the idempotency client interceptor, so it sees
// every retry.
func (t *telemetry) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(t.tp), otelgrpc.WithMeterProvider(t.mp),
			otelgrpc.WithPropagators(propagators))),
		grpc.WithChainUnaryInterceptor(otelidempotency.UnaryClientInterceptor(otelidempotency.WithTracerProvider(t.tp))),
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// observers fans one decision out to several observers.
func observers(os ...idempotency.Observer) idempotency.Observer {
	return idempotency.ObserverFunc(func(ctx context.Context, e idempotency.Event) {
		for _, o := range os {
			o.Observe(ctx, e)
		}
	})
}
