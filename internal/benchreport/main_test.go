package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
cpu: Test CPU
BenchmarkUnary/bare/callers=1-2   	 100	 1000 ns/op	 10 B/op	 1 allocs/op
BenchmarkUnary/bare/callers=1-2   	 100	 3000 ns/op	 10 B/op	 1 allocs/op
BenchmarkUnary/bare/callers=1-2   	 100	 2000 ns/op	 10 B/op	 1 allocs/op
BenchmarkUnary/redis-replay/callers=64-2 	 100	 500 ns/op	 1.000 roundtrips/op	 10 B/op	 1 allocs/op
not a benchmark line
`

func TestParseTakesMedianPerMetric(t *testing.T) {
	t.Parallel()
	res, order, header := parse(strings.NewReader(sample))
	if len(order) != 2 || order[0] != "BenchmarkUnary/bare/callers=1" {
		t.Fatalf("order %q, want the two benchmarks without the -2 suffix", order)
	}
	if got, ok := res.get("BenchmarkUnary/bare/callers=1", "ns/op"); !ok || got != 2000 {
		t.Fatalf("median ns/op = %v, %v; want 2000", got, ok)
	}
	if got, _ := res.get("BenchmarkUnary/redis-replay/callers=64", "roundtrips/op"); got != 1 {
		t.Fatalf("roundtrips/op = %v, want 1", got)
	}
	if len(header) != 2 || header[1] != "cpu: Test CPU" {
		t.Fatalf("header %q", header)
	}
}

func TestTargetsNameMeasuredBenchmarks(t *testing.T) {
	t.Parallel()
	for _, tg := range targets() {
		if !strings.HasPrefix(tg.got, "Benchmark") || (tg.equals == 0 && !strings.HasPrefix(tg.base, "Benchmark")) {
			t.Errorf("target %q compares %q with %q", tg.what, tg.got, tg.base)
		}
		limits := 0
		for _, l := range []float64{tg.atMost, tg.atLeastThr, tg.equals} {
			if l > 0 {
				limits++
			}
		}
		if limits != 1 {
			t.Errorf("target %q must set exactly one limit", tg.what)
		}
	}
}

func TestThroughputOfTimesAndRates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, unit string
		got, base  float64
		want       float64
	}{
		{"TimeHalfAsFast", "ns/op", 200, 100, 0.5},
		{"TimeTwiceAsFast", "ns/op", 50, 100, 2},
		{"RateHalf", "claims/s", 500, 1000, 0.5},
		{"RateTwice", "claims/s", 2000, 1000, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := (target{unit: tc.unit}).throughput(tc.got, tc.base); got != tc.want {
				t.Fatalf("throughput(%v, %v) in %s = %v, want %v", tc.got, tc.base, tc.unit, got, tc.want)
			}
		})
	}
}
