package idempotency_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

// pairedCallsPerCaller is how many calls each caller makes in a block of
// the memory-sealed-paired rows before the other server's block.
const pairedCallsPerCaller = 4

// benchSealedPaired runs the memory-sealed-paired rows of BenchmarkUnary:
// b.N calls of a server without sealing and b.N of one with it
// (benchSealing), each over a memory store of its own, in blocks of
// pairedCallsPerCaller calls per caller of one server and then of the
// other, which one first alternating, so that both meet the same load
// over the run. Its calls are those of benchCalls. It reports each
// server's time per call (unsealed-ns/op, sealed-ns/op) and the median
// over the rounds of the ratio of their blocks' times (sealed/unsealed):
// the wall-clock cost of sealing measured side by side, which the memory
// and memory-sealed rows, run seconds apart, do not give on a shared
// machine. A median, because a collection or another process that lands
// on one block of a round slows that block alone.
func benchSealedPaired(b *testing.B, replay bool) {
	clients := [2]testingv1.TestServiceClient{
		serve(b, testkit.NewMemoryStore(b)),
		serve(b, testkit.NewMemoryStore(b), idempotency.WithSealing(benchSealing())),
	}
	req := &testingv1.DoRequest{Payload: "benchmark", Amount: 4200}
	benchtest.ForCallers(b, func(b *testing.B, callers int) {
		var keys [2]func(int64) string
		var seq [2]atomic.Int64
		call := func(s int) {
			ctx := metadata.AppendToOutgoingContext(context.Background(), idempotency.MetadataKey, keys[s](seq[s].Add(1)))
			if _, err := clients[s].Do(ctx, req); err != nil {
				b.Error(err)
			}
		}
		for s := range clients {
			keys[s] = benchtest.Keys(replay)
			if replay {
				call(s) // stores the key every call then replays
			}
		}
		var spent [2]time.Duration
		var ratios []float64
		b.ReportAllocs()
		runtime.GC()
		b.ResetTimer()
		for done, round := 0, 0; done < b.N; round++ {
			n := min(pairedCallsPerCaller*callers, b.N-done)
			var block [2]time.Duration
			for j := range clients {
				s := (round + j) % 2
				start := time.Now()
				pairedBlock(callers, n, func() { call(s) })
				block[s] = time.Since(start)
				spent[s] += block[s]
			}
			ratios = append(ratios, float64(block[1])/float64(block[0]))
			done += n
		}
		b.StopTimer()
		b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "unsealed-ns/op")
		b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "sealed-ns/op")
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "sealed/unsealed")
	})
}

// pairedBlock makes n calls of call from callers goroutines (the calling
// one, when callers is 1), and returns when all have returned.
func pairedBlock(callers, n int, call func()) {
	if callers == 1 {
		for range n {
			call()
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				call()
			}
		})
	}
	wg.Wait()
}
