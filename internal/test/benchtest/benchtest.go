// Package benchtest holds what the benchmarks of several packages share:
// the numbers of concurrent callers a row is measured at, the loop that
// makes b.N calls from that many goroutines, and the keys they send; and
// the loops of the stores' scale benchmarks, which time claims one by one
// against a filled store and report their latency.
package benchtest

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// Callers are the numbers of concurrent callers every row that compares
// concurrency is measured at: one, and 64.
var Callers = []int{1, 64}

// ForCallers runs f as one sub-benchmark per entry of [Callers], named
// "callers=N".
func ForCallers(b *testing.B, f func(b *testing.B, callers int)) {
	for _, callers := range Callers {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) { f(b, callers) })
	}
}

// Parallel reports allocations and runs body b.N times from callers
// goroutines (b.Loop in the benchmark's own goroutine when callers is 1,
// b.RunParallel with callers/GOMAXPROCS goroutines per P otherwise),
// handing each call a sequence number from 1.
func Parallel(b *testing.B, callers int, body func(i int64)) {
	b.ReportAllocs()
	var seq atomic.Int64
	if callers == 1 {
		for b.Loop() {
			body(seq.Add(1))
		}
		return
	}
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body(seq.Add(1))
		}
	})
}

// Keys returns the key of call i of a row: a new key per call, or with
// replay the same key for every call. The keys start with the time, so no
// two runs share one.
func Keys(replay bool) func(i int64) string {
	prefix := strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	return func(i int64) string {
		if replay {
			i = 0
		}
		return prefix + strconv.FormatInt(i, 10)
	}
}
