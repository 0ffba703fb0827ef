package otelidempotency

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/grpc-idempotency/idempotency/store"
)

// DefaultStatsInterval is how often [RegisterStoreMetrics] reads a
// store's Stats at most, unless [WithStatsInterval] says otherwise.
const DefaultStatsInterval = time.Minute

// RegisterStoreMetrics reports the entries of s and their bytes, by state,
// as two gauges ([StoreEntriesMetric], [StoreSizeMetric]) under [StateKey]
// and [EstimatedKey], read from s.Stats when a reader collects them, at
// most once every [WithStatsInterval] (default [DefaultStatsInterval]):
// collections in between report the figures read last. Stats may be
// costly (a sequential scan of the PostgreSQL table; the docs of each
// store say what it costs), so one process per store is enough to
// register them: every server over a shared store would report the same
// figures. Gauges, not sums, for that reason: adding up the reports of
// several processes means nothing.
//
// Stats runs in the collection, with the collection's context; a Stats
// that fails goes to otel.Handle, the collection reports nothing for the
// store, and Stats is tried again once the interval has passed. The
// instruments come from the [WithMeterProvider] provider (default the
// global one). Unregister the returned registration to stop reporting.
func RegisterStoreMetrics(s store.Inspector, opts ...Option) (metric.Registration, error) {
	c := newConfig(opts)
	meter := c.meterProvider.Meter(ScopeName)
	entries, err := meter.Int64ObservableGauge(StoreEntriesMetric,
		metric.WithUnit("{entry}"),
		metric.WithDescription("Live entries of the idempotency store, by state."))
	if err != nil {
		return nil, err
	}
	size, err := meter.Int64ObservableGauge(StoreSizeMetric,
		metric.WithUnit("By"),
		metric.WithDescription("Bytes the idempotency store keeps for its live entries, by state."))
	if err != nil {
		return nil, err
	}
	g := &storeGauges{store: s, interval: c.statsInterval, entries: entries, size: size}
	return meter.RegisterCallback(g.observe, entries, size)
}

// storeGauges reads a store's Stats for the gauges, at most once per
// interval.
type storeGauges struct {
	store    store.Inspector
	interval time.Duration
	entries  metric.Int64ObservableGauge
	size     metric.Int64ObservableGauge

	mu    sync.Mutex // serialises collections
	read  time.Time  // when Stats was last called; zero before
	stats store.Stats
	ok    bool // stats holds the figures of the last call
}

func (g *storeGauges) observe(ctx context.Context, o metric.Observer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.read.IsZero() || time.Since(g.read) >= g.interval {
		g.read = time.Now()
		st, err := g.store.Stats(ctx)
		g.stats, g.ok = st, err == nil
		handle(err)
	}
	if !g.ok {
		return nil
	}
	for _, p := range []struct {
		state store.State
		count store.Count
	}{
		{store.StateInFlight, g.stats.InFlight},
		{store.StateAbandoned, g.stats.Abandoned},
		{store.StateCompleted, g.stats.Completed},
	} {
		set := metric.WithAttributeSet(attribute.NewSet(StateKey.String(p.state.String()), EstimatedKey.Bool(g.stats.Estimated)))
		o.ObserveInt64(g.entries, p.count.Entries, set)
		o.ObserveInt64(g.size, p.count.Bytes, set)
	}
	return nil
}
