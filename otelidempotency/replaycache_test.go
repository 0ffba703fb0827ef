package otelidempotency_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
)

// The replay cache's figures, as a reader collects them: its entries and
// bytes against its bounds as gauges, and the entries it evicted as a
// cumulative counter; a server without a cache reports nothing.
func TestRegisterReplayCacheMetrics(t *testing.T) {
	t.Parallel()
	mem := testkit.NewMemoryStore(t)
	srv := idempotency.NewServer(mem, idempotency.WithReplayCache(2, 1<<20, time.Hour))
	t.Cleanup(func() { _ = srv.Close() })
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	reg, err := otelidempotency.RegisterReplayCacheMetrics(srv, otelidempotency.WithMeterProvider(provider))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Unregister() })

	want := map[string]int64{
		otelidempotency.ReplayCacheEntriesMetric:      0,
		otelidempotency.ReplayCacheEntriesLimitMetric: 2,
		otelidempotency.ReplayCacheSizeLimitMetric:    1 << 20,
		otelidempotency.ReplayCacheEvictionsMetric:    0,
	}
	got := cacheMetrics(t, reader)
	if size := got[otelidempotency.ReplayCacheSizeMetric]; size != 0 {
		t.Errorf("before any call: size %d, want 0", size)
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("before any call: %s = %d, want %d", name, got[name], v)
		}
	}

	for i := range 3 { // the third evicts the first
		key := fmt.Sprint("k", i)
		_, _, err := idempotency.Do(t.Context(), srv, "charge", key, wrapperspb.String(key), func(context.Context) (*wrapperspb.StringValue, error) {
			return wrapperspb.String("charged " + key), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	st, _ := srv.ReplayCacheStats()
	if st.Entries != 2 || st.Evictions != 1 || st.Bytes <= 2*192 {
		t.Fatalf("ReplayCacheStats() = %+v, want 2 entries of over 192 bytes each, 1 eviction", st)
	}
	want[otelidempotency.ReplayCacheEntriesMetric] = 2
	want[otelidempotency.ReplayCacheSizeMetric] = st.Bytes
	want[otelidempotency.ReplayCacheEvictionsMetric] = 1
	got = cacheMetrics(t, reader)
	for name, v := range want {
		if got[name] != v {
			t.Errorf("after 3 keys: %s = %d, want %d", name, got[name], v)
		}
	}

	// A server without a cache reports nothing.
	none := sdkmetric.NewManualReader()
	noneProvider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(none))
	t.Cleanup(func() { _ = noneProvider.Shutdown(context.Background()) })
	reg2, err := otelidempotency.RegisterReplayCacheMetrics(idempotency.NewServer(mem), otelidempotency.WithMeterProvider(noneProvider))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg2.Unregister() })
	if got := cacheMetrics(t, none); len(got) != 0 {
		t.Fatalf("a server without a cache reported %v, want nothing", got)
	}
}

// cacheMetrics collects the replay cache's metrics: each one's single
// point, checking its kind, unit, scope and that it has no attributes.
func cacheMetrics(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	units := map[string]string{
		otelidempotency.ReplayCacheEntriesMetric:      "{entry}",
		otelidempotency.ReplayCacheEntriesLimitMetric: "{entry}",
		otelidempotency.ReplayCacheSizeMetric:         "By",
		otelidempotency.ReplayCacheSizeLimitMetric:    "By",
		otelidempotency.ReplayCacheEvictionsMetric:    "{entry}",
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			unit, ok := units[m.Name]
			if !ok {
				continue
			}
			if m.Unit != unit || sm.Scope.Name != otelidempotency.ScopeName {
				t.Fatalf("%s has the unit %q in scope %q, want %q in %q", m.Name, m.Unit, sm.Scope.Name, unit, otelidempotency.ScopeName)
			}
			var points []metricdata.DataPoint[int64]
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				if m.Name == otelidempotency.ReplayCacheEvictionsMetric {
					t.Fatalf("%s is a gauge, want a cumulative monotonic sum", m.Name)
				}
				points = d.DataPoints
			case metricdata.Sum[int64]:
				if m.Name != otelidempotency.ReplayCacheEvictionsMetric || !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Fatalf("%s is a sum (monotonic %t, %v)", m.Name, d.IsMonotonic, d.Temporality)
				}
				points = d.DataPoints
			default:
				t.Fatalf("%s is a %T", m.Name, m.Data)
			}
			if len(points) != 1 || points[0].Attributes.Len() != 0 {
				t.Fatalf("%s has points %v, want one without attributes", m.Name, points)
			}
			out[m.Name] = points[0].Value
		}
	}
	return out
}
