package otelidempotency

import (
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures [NewObserver], [UnaryClientInterceptor],
// [RegisterStoreMetrics], [RegisterSealingMetrics] and
// [RegisterReplayCacheMetrics].
type Option func(*config)

type config struct {
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	semconv        semconvMode
	statsInterval  time.Duration
}

func newConfig(opts []Option) config {
	c := config{semconv: semconvModeFromEnv(), statsInterval: DefaultStatsInterval}
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

// WithMeterProvider sets the MeterProvider that [NewObserver] and the
// Register functions ([RegisterStoreMetrics], [RegisterSealingMetrics],
// [RegisterReplayCacheMetrics]) create their instruments with. Default: otel.GetMeterProvider(), the global one, read
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

// WithStatsInterval sets how often [RegisterStoreMetrics] reads the
// store's Stats at most; collections in between report the figures read
// last. Zero or less reads them at every collection. Default:
// [DefaultStatsInterval], one minute.
func WithStatsInterval(d time.Duration) Option {
	return func(c *config) { c.statsInterval = d }
}
