package benchtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// The loops of the stores' scale benchmarks (memorystore's BenchmarkScale,
// postgresstore's BenchmarkPostgresScale): the same claims, timed one by
// one, against a store the benchmark has filled, so that only the number
// of stored records differs between rows.

// ClaimNew times b.N claims of new keys, key(first), key(first+1) and so
// on, each released at once so that the store keeps its size, and reports
// their latency ([ReportLatency]). Every claim must win.
func ClaimNew(b *testing.B, s store.Store, fingerprint []byte, first int, key func(i int) string) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	i := first
	for b.Loop() {
		k := key(i)
		i++
		start := time.Now()
		c, err := s.Claim(ctx, k, fingerprint, time.Minute, store.ClaimOptions{})
		lat = append(lat, time.Since(start))
		if err != nil || !c.Won() {
			b.Fatalf("claim: won=%v err=%v", c.Won(), err)
		}
		if err := s.Release(ctx, k, c.Token); err != nil {
			b.Fatal(err)
		}
	}
	ReportLatency(b, lat)
}

// ClaimCompleted times b.N claims of the completed keys, in turn (a
// replay's claim), and reports their latency ([ReportLatency]). No claim
// may win.
func ClaimCompleted(b *testing.B, s store.Store, fingerprint []byte, keys []string) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	j := 0
	for b.Loop() {
		k := keys[j%len(keys)]
		j++
		start := time.Now()
		c, err := s.Claim(ctx, k, fingerprint, time.Minute, store.ClaimOptions{})
		lat = append(lat, time.Since(start))
		if err != nil || c.Won() {
			b.Fatalf("replay claim: won=%v err=%v", c.Won(), err)
		}
	}
	ReportLatency(b, lat)
}

// ReportLatency reports the median (p50-ns), 99th percentile (p99-ns) and
// worst (max-ns) of lat, in nanoseconds; it sorts lat.
func ReportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
}
