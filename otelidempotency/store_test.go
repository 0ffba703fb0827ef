package otelidempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/otelidempotency"
	"github.com/grpc-idempotency/idempotency/store"
)

// statsCalls decorates a real store's Inspector: it counts the Stats
// calls, can fail them, and can mark their figures estimated, as the
// Redis store's are above 1,000 keys.
type statsCalls struct {
	store.Inspector
	calls     atomic.Int64
	fail      atomic.Bool
	estimated bool
}

var errStats = errors.New("stats: connection refused")

func (s *statsCalls) Stats(ctx context.Context) (store.Stats, error) {
	s.calls.Add(1)
	if s.fail.Load() {
		return store.Stats{}, errStats
	}
	st, err := s.Inspector.Stats(ctx)
	st.Estimated = st.Estimated || s.estimated
	return st, err
}

// gauge is one point of a store gauge.
type gauge struct {
	state     string
	estimated bool
}

// storeGauges collects the store gauges: the points of each, by state
// and estimated.
func storeGauges(t *testing.T, reader *sdkmetric.ManualReader) (entries, size map[gauge]int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	entries, size = map[gauge]int64{}, map[gauge]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			into := map[string]map[gauge]int64{otelidempotency.StoreEntriesMetric: entries, otelidempotency.StoreSizeMetric: size}[m.Name]
			g, ok := m.Data.(metricdata.Gauge[int64])
			if into == nil {
				continue
			}
			if !ok || sm.Scope.Name != otelidempotency.ScopeName {
				t.Fatalf("%s is a %T in scope %q; want a gauge in %q", m.Name, m.Data, sm.Scope.Name, otelidempotency.ScopeName)
			}
			for _, dp := range g.DataPoints {
				state, _ := dp.Attributes.Value(otelidempotency.StateKey)
				est, _ := dp.Attributes.Value(otelidempotency.EstimatedKey)
				if dp.Attributes.Len() != 2 {
					t.Errorf("%s point attributes %v, want state and estimated", m.Name, dp.Attributes.ToSlice())
				}
				into[gauge{state.AsString(), est.AsBool()}] = dp.Value
			}
		}
	}
	return entries, size
}

// fill claims n keys in s and completes the first done of them.
func fill(t *testing.T, s store.Store, prefix string, n, done int) {
	t.Helper()
	for i := range n {
		key := prefix + string(rune('a'+i))
		c, err := s.Claim(t.Context(), key, []byte("fp"), time.Hour, store.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i < done {
			if err := s.Complete(t.Context(), key, c.Token, []byte("outcome"), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// abandon leaves key abandoned in s, as a server that died mid-handler
// under a policy for abandoned claims leaves it.
func abandon(t *testing.T, s store.Store, key string) {
	t.Helper()
	c, err := s.Claim(t.Context(), key, []byte("fp"), time.Hour, store.ClaimOptions{Keep: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Abandon(t.Context(), key, c.Token); err != nil {
		t.Fatal(err)
	}
}

// TestStoreMetrics: the gauges report the store's entries and bytes by
// state as its Stats counts them, read at most once per interval; Stats
// is read again once the interval has passed (at every collection with
// an interval of zero).
func TestStoreMetrics(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		interval time.Duration
		calls    int64 // Stats calls for the two collections
	}{
		{"within the interval", time.Hour, 1},
		{"every collection", 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem := testkit.NewMemoryStore(t)
			fill(t, mem, "k-", 3, 1)
			abandon(t, mem, "gone")
			insp := &statsCalls{Inspector: mem}
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			if _, err := otelidempotency.RegisterStoreMetrics(insp, otelidempotency.WithMeterProvider(mp),
				otelidempotency.WithStatsInterval(tt.interval)); err != nil {
				t.Fatal(err)
			}
			want, err := mem.Stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			entries, size := storeGauges(t, reader)
			inFlight, completed, abandoned := gauge{"in_flight", false}, gauge{"completed", false}, gauge{"abandoned", false}
			if entries[inFlight] != 2 || entries[completed] != 1 || entries[abandoned] != 1 || len(entries) != 3 {
				t.Fatalf("entries %v; want 2 in flight, 1 abandoned and 1 completed", entries)
			}
			if size[inFlight] != want.InFlight.Bytes || size[completed] != want.Completed.Bytes || size[abandoned] != want.Abandoned.Bytes ||
				len(size) != 3 || want.Completed.Bytes <= 0 || want.Abandoned.Bytes <= 0 {
				t.Fatalf("size %v; want %v", size, want)
			}

			fill(t, mem, "more-", 2, 0)
			entries, _ = storeGauges(t, reader)
			wantInFlight := map[int64]int64{1: 2, 2: 4}[tt.calls]
			if entries[inFlight] != wantInFlight {
				t.Fatalf("entries in flight after two more claims: %d, want %d", entries[inFlight], wantInFlight)
			}
			if n := insp.calls.Load(); n != tt.calls {
				t.Fatalf("Stats called %d times for two collections, want %d", n, tt.calls)
			}
		})
	}
}

// TestStoreMetricsEstimatedAndFailing: figures a store estimated carry
// estimated=true; a Stats that fails reports nothing rather than figures
// read before, and Unregister stops the reports.
func TestStoreMetricsEstimatedAndFailing(t *testing.T) {
	t.Parallel()
	mem := testkit.NewMemoryStore(t)
	fill(t, mem, "k-", 1, 1)
	insp := &statsCalls{Inspector: mem, estimated: true}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	reg, err := otelidempotency.RegisterStoreMetrics(insp, otelidempotency.WithMeterProvider(mp), otelidempotency.WithStatsInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := storeGauges(t, reader)
	if entries[gauge{"completed", true}] != 1 || len(entries) != 3 {
		t.Fatalf("entries %v; want 1 completed, estimated", entries)
	}
	insp.fail.Store(true)
	if entries, size := storeGauges(t, reader); len(entries)+len(size) != 0 {
		t.Fatalf("after a failed Stats: entries %v, size %v; want no points", entries, size)
	}
	insp.fail.Store(false)
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	before := insp.calls.Load()
	if entries, _ := storeGauges(t, reader); len(entries) != 0 || insp.calls.Load() != before {
		t.Fatalf("after Unregister: entries %v, %d more Stats calls; want none", entries, insp.calls.Load()-before)
	}
}
