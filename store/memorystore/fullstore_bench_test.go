package memorystore_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// fullEntries is the size of the full store in BenchmarkClaimFullSteadyExpiry.
const fullEntries = 300_000

// BenchmarkClaimFullSteadyExpiry measures new-key claims on a store bounded
// by WithMaxEntries(300,000), empty and full, with steady expiry at the
// claim rate: each claim is completed with a retention of 1ns, so every
// claim leaves one expired entry behind, and in the full store every claim
// of a new key must first find an expired entry to drop among 300,000 live
// ones. It reports claims/s and the latency of the claims (p50, p99 and the
// worst one); the full store's rate is meant to stay within 2x of the empty
// one's, whatever its size. A claim refused with store.ErrFull is counted
// in refused/op and not in claims/s. Both stores are warmed up with
// 300,000 claims before the timer starts (see warmUp).
func BenchmarkClaimFullSteadyExpiry(b *testing.B) {
	for _, tc := range []struct {
		name string
		fill int
	}{
		{"empty", 0},
		{"full", fullEntries},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := memorystore.New(memorystore.WithMaxEntries(fullEntries))
			defer s.Close() // not b.Cleanup: each run's store is garbage after it
			fp, data := make([]byte, 32), make([]byte, 256)
			if tc.fill > 0 {
				// One expired entry per claiming goroutine to start with;
				// from then on each leaves its own behind.
				expired := runtime.GOMAXPROCS(0)
				fillRecords(b, s, tc.fill-expired, fp, data)
				fillExpired(b, s, expired)
				if n := s.Len(); n != fullEntries {
					b.Fatalf("Len = %d after filling, want %d", n, fullEntries)
				}
			}
			var (
				gid, refused atomic.Int64
				mu           sync.Mutex
				lats         []time.Duration
			)
			warmUp(b, s, fp, data)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				keys := ringKeys(gid.Add(1))
				lat := make([]time.Duration, 0, 1<<16)
				for i := 0; pb.Next(); i++ {
					k := keys[i&1023]
					start := time.Now()
					c, err := s.Claim(b.Context(), k, fp, time.Minute, store.ClaimOptions{})
					lat = append(lat, time.Since(start))
					if errors.Is(err, store.ErrFull) {
						refused.Add(1)
						continue
					}
					if err != nil || !c.Won() {
						b.Errorf("Claim: won=%v err=%v", c.Won(), err)
						return
					}
					if err := s.Complete(b.Context(), k, c.Token, data, time.Nanosecond); err != nil {
						b.Error(err)
						return
					}
				}
				mu.Lock()
				lats = append(lats, lat...)
				mu.Unlock()
			})
			won := b.N - int(refused.Load())
			b.ReportMetric(float64(won)/b.Elapsed().Seconds(), "claims/s")
			b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
			reportLatency(b, lats)
		})
	}
}

// warmUp makes fullEntries claims the way the benchmark does, from one
// goroutine, then collects the garbage. A store just filled sits in a Go
// heap that has never grown past it: the first claims after the fill get
// memory the process has never touched, and pay the kernel for it, which a
// store that has been full for a while does not.
func warmUp(b *testing.B, s *memorystore.Store, fp, data []byte) {
	b.Helper()
	ctx := context.Background()
	keys := ringKeys(0) // the benchmark's goroutines count from 1
	for i := range fullEntries {
		k := keys[i&1023]
		c, err := s.Claim(ctx, k, fp, time.Minute, store.ClaimOptions{})
		if err != nil || !c.Won() {
			b.Fatalf("warm-up Claim: won=%v err=%v", c.Won(), err)
		}
		if err := s.Complete(ctx, k, c.Token, data, time.Nanosecond); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
}

// fillExpired claims n keys and completes them with a retention of 1ns.
func fillExpired(b *testing.B, s *memorystore.Store, n int) {
	b.Helper()
	ctx := context.Background()
	for i := range n {
		k := "expired-" + strconv.Itoa(i)
		c, err := s.Claim(ctx, k, nil, time.Minute, store.ClaimOptions{})
		if err != nil || !c.Won() {
			b.Fatalf("Claim %q: won=%v err=%v", k, c.Won(), err)
		}
		if err := s.Complete(ctx, k, c.Token, nil, time.Nanosecond); err != nil {
			b.Fatal(err)
		}
	}
}
