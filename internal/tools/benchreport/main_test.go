package main

import (
	"slices"
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
		if !strings.HasPrefix(tg.got, "Benchmark") || (tg.base != "" && !strings.HasPrefix(tg.base, "Benchmark")) {
			t.Errorf("target %q compares %q with %q", tg.what, tg.got, tg.base)
		}
		if tg.base == "" && (tg.atLeastThr > 0 || tg.additive) {
			t.Errorf("target %q has a throughput or additive limit and no base", tg.what)
		}
		if tg.equals != nil && tg.base != "" {
			t.Errorf("target %q must equal a value and has a base", tg.what)
		}
		// A floor row is the got row's floor twin: same benchmark, path and
		// callers, against a bare base.
		if tg.floor != "" && (tg.floor != strings.Replace(tg.got, "/memory-", "/floor-", 1) || tg.floor == tg.got ||
			!strings.Contains(tg.base, "/bare/") || !strings.Contains(tg.what, "vs bare")) {
			t.Errorf("target %q of %q against %q has the floor row %q", tg.what, tg.got, tg.base, tg.floor)
		}
		if strings.HasPrefix(tg.what, "memory ") && strings.Contains(tg.what, " vs bare") && tg.floor == "" {
			t.Errorf("target %q against bare has no floor row", tg.what)
		}
		// A sealed row is held against its unsealed twin (same benchmark,
		// path and callers) in instructions, and in time is a paired row,
		// its ratio measured in the row itself.
		sealed := strings.Contains(tg.got, "/memory-sealed-")
		paired := strings.Contains(tg.got, "/memory-sealed-paired-")
		if sealed != strings.HasPrefix(tg.what, "sealed vs unsealed ") || sealed && tg.atMost != 1.05 ||
			paired && (tg.base != "" || tg.unit != "sealed/unsealed" || !strings.HasSuffix(tg.what, " (paired)")) ||
			sealed && !paired && (tg.base != strings.Replace(tg.got, "/memory-sealed-", "/memory-", 1) || tg.unit != "instr/op") {
			t.Errorf("target %q compares %q with %q in %s, at most %vx", tg.what, tg.got, tg.base, tg.unit, tg.atMost)
		}
		limits := 0
		for _, l := range []float64{tg.atMost, tg.atLeastThr} {
			if l > 0 {
				limits++
			}
		}
		if tg.equals != nil {
			limits++
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

func TestTargetsTable(t *testing.T) {
	t.Parallel()
	res, _, _ := parse(strings.NewReader(`
BenchmarkUnary/bare/callers=1-2 	 100	 1000 ns/op
BenchmarkUnary/floor-replay/callers=1-2 	 100	 1010 ns/op
BenchmarkUnary/memory-replay/callers=1-2 	 100	 1024 ns/op
BenchmarkUnary/memory-executed/callers=1-2 	 100	 1050 ns/op
BenchmarkUnary/memory-sealed-executed/callers=1-2 	 100	 1100 ns/op
BenchmarkUnary/memory-sealed-replay/callers=1-2 	 100	 1080 ns/op
BenchmarkUnary/memory-sealed-paired-executed/callers=1-2 	 100	 2150 ns/op	 1.048 sealed/unsealed
BenchmarkUnary/memory-sealed-paired-replay/callers=1-2 	 100	 2110 ns/op	 1.055 sealed/unsealed
BenchmarkUnary/memory-sealed-replay/callers=64-2 	 100	 9000 ns/op
BenchmarkUnary/bare/callers=64-2 	 100	 10000 ns/op
BenchmarkUnary/redis-replay/callers=64-2 	 100	 17000 ns/op
BenchmarkUnaryInstructions/bare/callers=1	1	200000 instr/op
BenchmarkUnaryInstructions/floor-replay/callers=1	1	210000 instr/op
BenchmarkUnaryInstructions/memory-replay/callers=1	1	204000 instr/op
BenchmarkUnaryInstructions/memory-sealed-replay/callers=1	1	210000 instr/op
BenchmarkClaimCompleted/goroutines=1/paired-2 	 100	 5000 ns/op	 1.25 claim/select
BenchmarkClaimCompleted/goroutines=16/claim-2 	 100	 5000 ns/op	 80000 ops/s
BenchmarkClaimCompleted/goroutines=16/claim-old-2 	 100	 5000 ns/op	 10003 ops/s
BenchmarkUnaryPostgres/postgres-executed/callers=64-2 	 100	 100000 ns/op
BenchmarkUnaryPostgres/postgres-replay/callers=64-2 	 100	 30000 ns/op
BenchmarkUnaryPostgres/postgres-replay/callers=1-2 	 100	 90000 ns/op	 2 roundtrips/op
BenchmarkUnaryPostgres/tx-executed/callers=1-2 	 100	 90000 ns/op	 0 after-handler/op
BenchmarkInspectRedis/list-2 	 100	 3000000 ns/op	 3345437 p99-ns
BenchmarkUnaryPostgres/tx-executed/callers=64-2 	 100	 90000 ns/op	 1 after-handler/op
`))
	var current, earlier strings.Builder
	all := targets()
	writeTargets(&current, res, slices.DeleteFunc(slices.Clone(all), func(tg target) bool { return tg.earlier }))
	writeTargets(&earlier, res, slices.DeleteFunc(slices.Clone(all), func(tg target) bool { return !tg.earlier }))
	for _, want := range []string{
		"| target | measured | limit | met | floor |\n|---|---|---|---|---|\n",
		"| memory replay vs bare, callers=1 | 1.024x | <= 1.02x | **no** (see [the notes](docs/development.md)) | 1.01x |\n", // not 1.02x
		"| memory executed vs bare, callers=1 | 1.05x | <= 1.10x | yes | not measured |\n",                                   // no floor-executed row
		"| memory replay vs bare, callers=64 | not measured | | | not measured |\n",
		"| memory replay vs bare, callers=1, instructions | 1.02x | <= 1.02x | yes | 1.05x |\n",
		"| redis replay from the replay cache vs memory replay, callers=1 | not measured | | | |\n", // no floor cell
		"| sealed vs unsealed memory executed, callers=1 (paired) | 1.048x | <= 1.05x | yes | |\n",  // the paired row's own ratio, not 1100/1050
		"| sealed vs unsealed memory replay, callers=1 (paired) | 1.055x | <= 1.05x | **no** (see [the notes](docs/development.md)) | |\n",
		"| sealed vs unsealed memory replay, callers=64 (paired) | not measured | | | |\n", // a memory-sealed-replay row is not a paired one
		"| sealed vs unsealed memory executed, callers=64 (paired) | not measured | | | |\n",
		"| sealed vs unsealed memory replay, callers=1, instructions | 1.03x | <= 1.05x | yes | |\n",
		"| sealed vs unsealed memory executed, callers=1, instructions | not measured | | | |\n",
		"| postgres claim of a completed key vs a SELECT, 1 goroutine (paired) | 1.25x | <= 1.30x | yes | |\n",
		"| postgres claim of a completed key, throughput vs the old claim, 16 goroutines | 799.8% | >= 800% | **no** (see [the notes](docs/development.md)) | |\n",
		"| postgres replay vs executed through gRPC, callers=64 | 0.30x | <= 0.25x | **no** (see [the notes](docs/development.md)) | |\n",
		"| redis replay vs bare, callers=64 | 1.70x | <= 1.60x | **no** (see [the notes](docs/development.md)) | |\n",
		"| postgres store claim p99, 1M vs 1k rows, sweeper running | not measured | | | |\n",
		"| list a page of 100 from 1M keys, p99, redis | 3.35 ms | <= 50 ms | yes | |\n", // a time, not a ratio
		"| round trips per call, postgres-replay, callers=1 | 2 | = 1 | **no** (see [the notes](docs/development.md)) | |\n",
		"| store calls after the handler, tx-executed, callers=1 | 0 | = 0 | yes | |\n", // a limit of 0
		"| store calls after the handler, tx-executed, callers=64 | 1 | = 0 | **no** (see [the notes](docs/development.md)) | |\n",
	} {
		if !strings.Contains(current.String(), want) {
			t.Errorf("targets table lacks %q:\n%s", want, current.String())
		}
	}
	for _, want := range []string{
		"| target | measured | limit | met |\n|---|---|---|---|\n", // no floor column
		"| redis replay throughput vs Redis ceiling, callers=64 | not measured | | |\n",
		"| memory store claim p99, 1M vs 1k records | not measured | | |\n",
	} {
		if !strings.Contains(earlier.String(), want) {
			t.Errorf("table of earlier targets lacks %q:\n%s", want, earlier.String())
		}
	}
	if strings.Contains(earlier.String(), "redis replay vs bare") || strings.Contains(current.String(), "Redis ceiling") {
		t.Errorf("a target is in the wrong table:\n%s\n%s", current.String(), earlier.String())
	}
}

func TestApartShowsAMissedLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v, limit float64
		decimals int
		want     string
	}{
		{1.0300, 1.02, 2, "1.03"},
		{1.0200, 1.02, 2, "1.02"},    // meets it exactly
		{1.0240, 1.02, 2, "1.024"},   // misses it
		{1.0196, 1.02, 2, "1.0196"},  // under it by less than two decimals show
		{1.02004, 1.02, 2, "1.0200"}, // as far as it goes
		{799.6, 800, 0, "799.6"},
		{880, 800, 0, "880"},
	} {
		if got := apart(tc.v, tc.limit, tc.decimals); got != tc.want {
			t.Errorf("apart(%v, %v, %d) = %q, want %q", tc.v, tc.limit, tc.decimals, got, tc.want)
		}
	}
}
