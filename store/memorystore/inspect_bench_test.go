package memorystore_test

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// BenchmarkInspectMemory measures the store.Inspector on a memory store
// holding 1,000,000 entries (1% in flight, the rest completed with 200
// bytes of data): a page of List (Limit 100, each page from the cursor of
// the one before), a Lookup, and Stats. Each reports its p50, p99 and
// maximum latency.
func BenchmarkInspectMemory(b *testing.B) {
	n := benchtest.Size(1_000_000)
	s := memorystore.New()
	defer s.Close()
	ctx := b.Context()
	fp, data := make([]byte, 33), bytes.Repeat([]byte{0xab}, 200)
	for i := range n {
		k := "key-" + strconv.Itoa(i)
		c, err := s.Claim(ctx, k, fp, time.Hour, store.ClaimOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if i%100 != 0 {
			if err := s.Complete(ctx, k, c.Token, data, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("list", func(b *testing.B) {
		var opts store.ListOptions
		opts.Limit = 100
		lat := make([]time.Duration, 0, 1024)
		for b.Loop() {
			start := time.Now()
			page, err := s.List(ctx, opts)
			lat = append(lat, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
			opts.Cursor = page.Next
		}
		reportLatency(b, lat)
	})
	b.Run("lookup", func(b *testing.B) {
		lat := make([]time.Duration, 0, 1024)
		i := 0
		for b.Loop() {
			i = (i + 7919) % n
			start := time.Now()
			_, err := s.Lookup(ctx, "key-"+strconv.Itoa(i))
			lat = append(lat, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
		}
		reportLatency(b, lat)
	})
	b.Run("stats", func(b *testing.B) {
		lat := make([]time.Duration, 0, 1024)
		for b.Loop() {
			start := time.Now()
			st, err := s.Stats(ctx)
			lat = append(lat, time.Since(start))
			if err != nil || st.InFlight.Entries+st.Completed.Entries != int64(n) {
				b.Fatalf("Stats = %+v, %v", st, err)
			}
		}
		reportLatency(b, lat)
	})
}
