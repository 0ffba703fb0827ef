package otelidempotency

import (
	"context"

	"go.opentelemetry.io/otel/metric"

	"github.com/grpc-idempotency/idempotency"
)

// RegisterReplayCacheMetrics reports the fill of srv's replay cache
// ([idempotency.WithReplayCache]), read from
// [idempotency.Server.ReplayCacheStats] when a reader collects it: its
// entries and their bytes as gauges ([ReplayCacheEntriesMetric],
// [ReplayCacheSizeMetric]) beside its bounds
// ([ReplayCacheEntriesLimitMetric], [ReplayCacheSizeLimitMetric]), and the
// entries it evicted to make room under them as a cumulative counter
// ([ReplayCacheEvictionsMetric]), none with attributes. A cache at its
// bound that evicts steadily is too small for the keys replayed: their
// replays fall through to the store.
//
// Each server has a cache of its own: register it in every process, for
// the one server whose cache it reports (a second registration on the
// same provider reports points with the same attributes, and the
// backend cannot tell them apart). A server without a cache reports
// nothing. The instruments come from the [WithMeterProvider] provider
// (default the global one). Unregister the returned registration to stop
// reporting.
func RegisterReplayCacheMetrics(srv *idempotency.Server, opts ...Option) (metric.Registration, error) {
	c := newConfig(opts)
	meter := c.meterProvider.Meter(ScopeName)
	var gauges [4]metric.Int64ObservableGauge
	for i, g := range []struct{ name, unit, desc string }{
		{ReplayCacheEntriesMetric, "{entry}", "Entries of the idempotency server's replay cache."},
		{ReplayCacheEntriesLimitMetric, "{entry}", "The most entries the idempotency server's replay cache holds (WithReplayCache's maxEntries)."},
		{ReplayCacheSizeMetric, "By", "Bytes the entries of the idempotency server's replay cache count against its bound."},
		{ReplayCacheSizeLimitMetric, "By", "The most bytes the idempotency server's replay cache holds (WithReplayCache's maxBytes)."},
	} {
		var err error
		if gauges[i], err = meter.Int64ObservableGauge(g.name, metric.WithUnit(g.unit), metric.WithDescription(g.desc)); err != nil {
			return nil, err
		}
	}
	evictions, err := meter.Int64ObservableCounter(ReplayCacheEvictionsMetric,
		metric.WithUnit("{entry}"),
		metric.WithDescription("Entries the idempotency server's replay cache evicted to make room under its bounds, since the process started."))
	if err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st, ok := srv.ReplayCacheStats()
		if !ok {
			return nil
		}
		o.ObserveInt64(gauges[0], int64(st.Entries))
		o.ObserveInt64(gauges[1], int64(st.MaxEntries))
		o.ObserveInt64(gauges[2], st.Bytes)
		o.ObserveInt64(gauges[3], st.MaxBytes)
		o.ObserveInt64(evictions, int64(min(st.Evictions, 1<<63-1)))
		return nil
	}, gauges[0], gauges[1], gauges[2], gauges[3], evictions)
}
