// Command benchreport turns `go test -bench` output into BENCHMARKS.md: the
// median of every metric per benchmark, each performance target as a ratio
// against the baseline measured in the same run, and the tables of the
// entry points against their bare rows (tables.go).
//
//	go run ./internal/benchreport -cmd "<command>" bench.txt > BENCHMARKS.md
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// results maps a benchmark name (without the -GOMAXPROCS suffix) to its
// metrics, each with every sample seen.
type results map[string]map[string][]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader) (results, []string, []string) {
	res := results{}
	var order, header []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range []string{"goos:", "goarch:", "cpu:"} {
			if strings.HasPrefix(line, p) && !slices.Contains(header, line) {
				header = append(header, line)
			}
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		if res[name] == nil {
			res[name] = map[string][]float64{}
			order = append(order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				res[name][f[i+1]] = append(res[name][f[i+1]], v)
			}
		}
	}
	return res, order, header
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func (r results) get(name, unit string) (float64, bool) {
	v, ok := r[name][unit]
	return median(v), ok && len(v) > 0
}

// target is one row of the targets table: got/base of one metric, or the
// throughput of got against base's, against a limit; or one metric of got
// that must equal a value.
type target struct {
	what       string
	got, base  string
	unit       string
	atMost     float64 // ratio got/base must be <= atMost (0: not used)
	atLeastThr float64 // throughput ratio (see throughput) must be >= atLeastThr
	additive   bool    // got is a cost added to base: the ratio is (base+got)/base
	equals     float64 // got must be exactly this (0: not used); base is not used
}

// throughput returns the throughput of got as a share of base's: base/got
// for a time per operation, got/base for a rate (a unit ending in "/s").
func (t target) throughput(got, base float64) float64 {
	if strings.HasSuffix(t.unit, "/s") {
		return got / base
	}
	return base / got
}

func targets() []target {
	var t []target
	for _, c := range []string{"1", "64"} {
		u := "BenchmarkUnary/"
		t = append(t,
			target{"memory executed vs bare, callers=" + c, u + "memory-executed/callers=" + c, u + "bare/callers=" + c, "ns/op", 1.10, 0, false, 0},
			target{"memory replay vs bare, callers=" + c, u + "memory-replay/callers=" + c, u + "bare/callers=" + c, "ns/op", 1.00, 0, false, 0},
			target{"redis replay from the replay cache vs memory replay, callers=" + c, u + "redis-replay-cached/callers=" + c, u + "memory-replay/callers=" + c, "ns/op", 1.10, 0, false, 0},
			target{"postgres replay from the replay cache vs memory replay, callers=" + c, u + "postgres-replay-cached/callers=" + c, u + "memory-replay/callers=" + c, "ns/op", 1.10, 0, false, 0},
		)
	}
	u := "BenchmarkUnary/"
	t = append(t,
		target{what: "redis executed vs bare, callers=64", got: u + "redis-executed/callers=64", base: u + "bare/callers=64", unit: "ns/op", atMost: 2.50},
		target{what: "redis replay vs bare, callers=64", got: u + "redis-replay/callers=64", base: u + "bare/callers=64", unit: "ns/op", atMost: 1.80},
	)
	for _, row := range []struct {
		name  string
		trips float64
	}{{"redis-executed", 2}, {"redis-replay", 1}, {"redis-wait-executed", 2}, {"redis-wait-replay", 1}} {
		t = append(t, target{what: "round trips per call, " + row.name + ", callers=1", got: u + row.name + "/callers=1", unit: "roundtrips/op", equals: row.trips})
	}
	t = append(t,
		target{"redis executed throughput vs Redis ceiling, callers=64", u + "redis-executed/callers=64", u + "redis-ceiling-executed/callers=64", "ns/op", 0, 0.70, false, 0},
		target{"redis replay throughput vs Redis ceiling, callers=64", u + "redis-replay/callers=64", u + "redis-ceiling-replay/callers=64", "ns/op", 0, 0.70, false, 0},
		target{"client key interceptor alone, added to a bare client call", "BenchmarkClientInterceptor/key_only", "BenchmarkClientCall/bare", "ns/op", 1.02, 0, true, 0},
		target{"client call through the key interceptor vs bare client call", "BenchmarkClientCall/key_only", "BenchmarkClientCall/bare", "ns/op", 1.02, 0, false, 0},
	)
	f := "BenchmarkClaimFullSteadyExpiry/"
	t = append(t, target{"memory store claims/s, full 300k-entry store with steady expiry vs empty", f + "full", f + "empty", "claims/s", 0, 0.50, false, 0})
	s := "BenchmarkScale/records="
	for _, op := range []string{"claim", "replay"} {
		for _, q := range []string{"p50-ns", "p99-ns"} {
			t = append(t, target{"memory store " + op + " " + strings.TrimSuffix(q, "-ns") + ", 1M vs 1k records",
				s + "1000000/" + op, s + "1000/" + op, q, 1.30, 0, false, 0})
		}
	}
	p := "BenchmarkPostgresScale/records="
	t = append(t, target{"postgres store claim p99, 1M vs 1k rows, sweeper running",
		p + "1000000/claim", p + "1000/claim", "p99-ns", 1.50, 0, false, 0})
	return t
}

func main() {
	cmd := flag.String("cmd", "", "the command that produced the input")
	machine := flag.String("machine", "", "a line describing the machine")
	flag.Parse()
	in := io.Reader(os.Stdin)
	if flag.NArg() == 1 {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		in = f
	}
	res, order, header := parse(in)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()

	fmt.Fprintf(w, "# Benchmarks\n\nGenerated by `make bench` (scripts/bench.sh); do not edit by hand.\n\n")
	fmt.Fprintf(w, "Command:\n\n```\n%s\n```\n\nMachine: %s\n\n```\n%s\n```\n\n", *cmd, *machine, strings.Join(header, "\n"))
	fmt.Fprintf(w, "Every figure is the median over the runs. Ratios compare rows of the same run.\n\n")
	fmt.Fprintf(w, "## Targets\n\n| target | measured | limit | met |\n|---|---|---|---|\n")
	for _, t := range targets() {
		if t.equals != 0 {
			got, ok := res.get(t.got, t.unit)
			if !ok {
				fmt.Fprintf(w, "| %s | not measured | | |\n", t.what)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | = %s | %s |\n", t.what, format(got), format(t.equals), yes(got == t.equals))
			continue
		}
		got, ok1 := res.get(t.got, t.unit)
		base, ok2 := res.get(t.base, t.unit)
		if !ok1 || !ok2 || got == 0 || base == 0 {
			fmt.Fprintf(w, "| %s | not measured | | |\n", t.what)
			continue
		}
		if t.additive {
			got += base
		}
		if t.atMost > 0 {
			r := got / base
			fmt.Fprintf(w, "| %s | %.2fx | <= %.2fx | %s |\n", t.what, r, t.atMost, yes(r <= t.atMost))
		} else {
			r := t.throughput(got, base)
			fmt.Fprintf(w, "| %s | %.0f%% | >= %.0f%% | %s |\n", t.what, 100*r, 100*t.atLeastThr, yes(r >= t.atLeastThr))
		}
	}
	writeComparisons(w, res)
	fmt.Fprintf(w, "\n## All results\n\n| benchmark | metrics (median) |\n|---|---|\n")
	for _, name := range order {
		var units []string
		for u := range res[name] {
			units = append(units, u)
		}
		slices.Sort(units)
		var parts []string
		for _, u := range units {
			parts = append(parts, fmt.Sprintf("%s %s", format(median(res[name][u])), u))
		}
		fmt.Fprintf(w, "| `%s` | %s |\n", name, strings.Join(parts, ", "))
	}
	notes, err := os.ReadFile("scripts/bench-notes.md")
	if err == nil {
		fmt.Fprintf(w, "\n%s", notes)
	}
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no** (see notes)"
}

func format(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
