package otelidempotency

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures [NewObserver] and [UnaryClientInterceptor].
type Option func(*config)

type config struct {
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	semconv        semconvMode
}

func newConfig(opts []Option) config {
	c := config{semconv: semconvModeFromEnv()}
	for _, o := range opts {
		o(&c)
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	return c
}

// WithMeterProvider sets the MeterProvider that [NewObserver] creates its
// instruments with. Default: otel.GetMeterProvider(), the global one, read
// when the observer is built. A nil provider means the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meterProvider = mp }
}

// WithTracerProvider sets the TracerProvider that [UnaryClientInterceptor]
// starts its call spans with. The server side needs none: [NewObserver]
// annotates the span already in the call's context. Default:
// otel.GetTracerProvider(), the global one, read when the interceptor is
// built. A nil provider means the default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracerProvider = tp }
}
