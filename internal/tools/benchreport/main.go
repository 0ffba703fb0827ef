// Command benchreport turns `go test -bench` output into BENCHMARKS.md: the
// median of every metric per benchmark, each performance target as a ratio
// against the baseline measured in the same run, and the tables of the
// entry points against their bare rows (tables.go).
//
//	go run ./internal/tools/benchreport -cmd "<command>" bench.txt > BENCHMARKS.md
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

// target is one row of a targets table: got/base of one metric, or the
// throughput of got against base's, against a limit; or one metric of got
// that must equal a value, or that is itself a ratio (no base) and must
// stay under a limit.
type target struct {
	what       string
	got, base  string // base "": got's metric is compared with the limit as it is
	unit       string
	atMost     float64  // ratio got/base (got without base) must be <= atMost (0: not used)
	atLeastThr float64  // throughput ratio (see throughput) must be >= atLeastThr
	additive   bool     // got is a cost added to base: the ratio is (base+got)/base
	equals     *float64 // got must be exactly this (nil: not used); base is not used
	floor      string   // a floor row of got's benchmark, shown as its ratio to base ("": none)
	earlier    bool     // set by an earlier round: in a table of its own
}

// exactly returns a pointer to v, for a target's equals.
func exactly(v float64) *float64 { return &v }

// throughput returns the throughput of got as a share of base's: base/got
// for a time per operation, got/base for a rate (a unit ending in "/s").
func (t target) throughput(got, base float64) float64 {
	if strings.HasSuffix(t.unit, "/s") {
		return got / base
	}
	return base / got
}

// unaryTargets returns the memory, sealing and replay cache targets of the
// rows of bench (BenchmarkUnary in ns/op, BenchmarkUnaryInstructions in
// instr/op), each what followed by suffix. The memory rows against bare
// have the floor row of the same path and callers beside them. In
// instructions, the sealed memory rows are held against the unsealed ones
// of the same run; in time, the paired rows that run both in turn are
// (memory-sealed-paired-*, their metric sealed/unsealed): rows run seconds
// apart differ by more than 5% on a shared machine with no change at all.
func unaryTargets(bench, unit, suffix string) []target {
	var t []target
	for _, c := range []string{"1", "64"} {
		u := bench + "/"
		row := func(name string) string { return u + name + "/callers=" + c }
		t = append(t,
			target{what: "memory executed vs bare, callers=" + c + suffix, got: row("memory-executed"), base: row("bare"), unit: unit, atMost: 1.10, floor: row("floor-executed")},
			target{what: "memory replay vs bare, callers=" + c + suffix, got: row("memory-replay"), base: row("bare"), unit: unit, atMost: 1.02, floor: row("floor-replay")},
			target{what: "redis replay from the replay cache vs memory replay, callers=" + c + suffix, got: row("redis-replay-cached"), base: row("memory-replay"), unit: unit, atMost: 1.10},
			target{what: "postgres replay from the replay cache vs memory replay, callers=" + c + suffix, got: row("postgres-replay-cached"), base: row("memory-replay"), unit: unit, atMost: 1.10},
			target{what: "mysql replay from the replay cache vs memory replay, callers=" + c + suffix, got: row("mysql-replay-cached"), base: row("memory-replay"), unit: unit, atMost: 1.10},
		)
		for _, path := range []string{"executed", "replay"} {
			what := "sealed vs unsealed memory " + path + ", callers=" + c + suffix
			if unit == "instr/op" {
				t = append(t, target{what: what, got: row("memory-sealed-" + path), base: row("memory-" + path), unit: unit, atMost: 1.05})
			} else {
				t = append(t, target{what: what + " (paired)", got: row("memory-sealed-paired-" + path), unit: "sealed/unsealed", atMost: 1.05})
			}
		}
	}
	return t
}

func targets() []target {
	t := unaryTargets("BenchmarkUnary", "ns/op", "")
	t = append(t, unaryTargets("BenchmarkUnaryInstructions", "instr/op", ", instructions")...)
	u := "BenchmarkUnary/"
	t = append(t,
		target{what: "redis executed vs bare, callers=64", got: u + "redis-executed/callers=64", base: u + "bare/callers=64", unit: "ns/op", atMost: 2.50},
		target{what: "redis replay vs bare, callers=64", got: u + "redis-replay/callers=64", base: u + "bare/callers=64", unit: "ns/op", atMost: 1.60},
	)
	for _, row := range []struct {
		name  string
		trips float64
	}{{"redis-executed", 2}, {"redis-replay", 1}, {"redis-wait-executed", 2}, {"redis-wait-replay", 1}} {
		t = append(t, target{what: "round trips per call, " + row.name + ", callers=1", got: u + row.name + "/callers=1", unit: "roundtrips/op", equals: exactly(row.trips)})
	}
	cc := "BenchmarkClaimCompleted/goroutines="
	pu := "BenchmarkUnaryPostgres/"
	t = append(t,
		target{what: "postgres claim of a completed key vs a SELECT, 1 goroutine (paired)", got: cc + "1/paired", unit: "claim/select", atMost: 1.30},
		target{what: "postgres claim of a completed key, throughput vs the old claim, 16 goroutines", got: cc + "16/claim", base: cc + "16/claim-old", unit: "ops/s", atLeastThr: 8},
		target{what: "postgres replay vs executed through gRPC, callers=64", got: pu + "postgres-replay/callers=64", base: pu + "postgres-executed/callers=64", unit: "ns/op", atMost: 0.25},
	)
	// Executed calls keep their two statements (a read that misses is not
	// a third), a replay its one, the transactional path its claim and the
	// CompleteTx statement inside the handler's own transaction.
	for _, row := range []struct {
		name  string
		trips float64
	}{{"postgres-executed", 2}, {"postgres-replay", 1}, {"tx-executed", 2}} {
		for _, c := range []string{"1", "64"} {
			t = append(t, target{what: "round trips per call, " + row.name + ", callers=" + c, got: pu + row.name + "/callers=" + c, unit: "roundtrips/op", equals: exactly(row.trips)})
		}
	}
	for _, c := range []string{"1", "64"} {
		t = append(t, target{what: "store calls after the handler, tx-executed, callers=" + c, got: pu + "tx-executed/callers=" + c, unit: "after-handler/op", equals: exactly(0)})
	}
	// MySQL: a replay costs at most 1.3 times a plain SELECT of its row;
	// an executed call three statements (the claim's SELECT and INSERT,
	// then the complete, or CompleteTx inside the handler's transaction),
	// a replay one.
	mu := "BenchmarkUnaryMySQL/"
	t = append(t, target{what: "mysql claim of a completed key vs a SELECT, 1 goroutine (paired)", got: "BenchmarkClaimCompletedMySQL/goroutines=1/paired", unit: "claim/select", atMost: 1.30})
	for _, row := range []struct {
		name  string
		trips float64
	}{{"mysql-executed", 3}, {"mysql-replay", 1}, {"mysql-tx-executed", 3}} {
		for _, c := range []string{"1", "64"} {
			t = append(t, target{what: "round trips per call, " + row.name + ", callers=" + c, got: mu + row.name + "/callers=" + c, unit: "roundtrips/op", equals: exactly(row.trips)})
		}
	}
	for _, c := range []string{"1", "64"} {
		t = append(t, target{what: "store calls after the handler, mysql-tx-executed, callers=" + c, got: mu + "mysql-tx-executed/callers=" + c, unit: "after-handler/op", equals: exactly(0)})
	}
	// An operator's reads of a store of a million entries stay quick: a
	// page of a listing under 50 ms at the 99th percentile.
	for _, st := range []string{"Redis", "Postgres"} {
		t = append(t, target{what: "list a page of 100 from 1M keys, p99, " + strings.ToLower(st),
			got: "BenchmarkInspect" + st + "/list", unit: "p99-ns", atMost: 50e6})
	}
	p := "BenchmarkPostgresScale/records="
	t = append(t, target{what: "postgres store claim p99, 1M vs 1k rows, sweeper running",
		got: p + "1000000/claim", base: p + "1000/claim", unit: "p99-ns", atMost: 1.50})

	t = append(t, floorTargets()...)

	t = append(t,
		target{what: "redis executed throughput vs Redis ceiling, callers=64", got: u + "redis-executed/callers=64", base: u + "redis-ceiling-executed/callers=64", unit: "ns/op", atLeastThr: 0.70, earlier: true},
		target{what: "redis replay throughput vs Redis ceiling, callers=64", got: u + "redis-replay/callers=64", base: u + "redis-ceiling-replay/callers=64", unit: "ns/op", atLeastThr: 0.70, earlier: true},
		target{what: "client key interceptor alone, added to a bare client call", got: "BenchmarkClientInterceptor/key_only", base: "BenchmarkClientCall/bare", unit: "ns/op", atMost: 1.02, additive: true, earlier: true},
		target{what: "client call through the key interceptor vs bare client call", got: "BenchmarkClientCall/key_only", base: "BenchmarkClientCall/bare", unit: "ns/op", atMost: 1.02, earlier: true},
	)
	f := "BenchmarkClaimFullSteadyExpiry/"
	t = append(t, target{what: "memory store claims/s, full 300k-entry store with steady expiry vs empty", got: f + "full", base: f + "empty", unit: "claims/s", atLeastThr: 0.50, earlier: true})
	s := "BenchmarkScale/records="
	for _, op := range []string{"claim", "replay"} {
		for _, q := range []string{"p50-ns", "p99-ns"} {
			t = append(t, target{what: "memory store " + op + " " + strings.TrimSuffix(q, "-ns") + ", 1M vs 1k records",
				got: s + "1000000/" + op, base: s + "1000/" + op, unit: q, atMost: 1.30, earlier: true})
		}
	}
	return t
}

// writeTargets writes the targets table of the targets ts with the medians
// of res; it has a floor column when a target has a floor row.
func writeTargets(w io.Writer, res results, ts []target) {
	floors := slices.ContainsFunc(ts, func(t target) bool { return t.floor != "" })
	if floors {
		fmt.Fprintf(w, "| target | measured | limit | met | floor |\n|---|---|---|---|---|\n")
	} else {
		fmt.Fprintf(w, "| target | measured | limit | met |\n|---|---|---|---|\n")
	}
	for _, t := range ts {
		cells := append([]string{t.what}, t.measure(res)...)
		if floors {
			cells = append(cells, t.floorRatio(res))
		}
		fmt.Fprintln(w, tableRow(cells))
	}
}

// tableRow returns the markdown row of cells, an empty cell as "| |".
func tableRow(cells []string) string {
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cells {
		if c != "" {
			b.WriteString(" " + c)
		}
		b.WriteString(" |")
	}
	return b.String()
}

// measure returns the measured, limit and met cells of t's row.
func (t target) measure(res results) []string {
	missing := []string{"not measured", "", ""}
	got, ok := res.get(t.got, t.unit)
	if !ok {
		return missing
	}
	if t.equals != nil {
		return []string{format(got), "= " + format(*t.equals), yes(got == *t.equals)}
	}
	r := got
	if t.base != "" {
		base, ok := res.get(t.base, t.unit)
		if !ok || got == 0 || base == 0 {
			return missing
		}
		if t.additive {
			got += base
		}
		r = got / base
		if t.atMost == 0 {
			r = t.throughput(got, base)
			return []string{apart(100*r, 100*t.atLeastThr, 0) + "%", fmt.Sprintf(">= %.0f%%", 100*t.atLeastThr), yes(r >= t.atLeastThr)}
		}
	}
	if t.base == "" && strings.HasSuffix(t.unit, "-ns") {
		// An absolute time, not a ratio: in milliseconds.
		return []string{apart(r/1e6, t.atMost/1e6, 2) + " ms", fmt.Sprintf("<= %.0f ms", t.atMost/1e6), yes(r <= t.atMost)}
	}
	return []string{apart(r, t.atMost, 2) + "x", fmt.Sprintf("<= %.2fx", t.atMost), yes(r <= t.atMost)}
}

// apart formats v with decimals decimals, or with up to two more when it
// would read as the limit it misses or just meets (1.0249 against 1.02 is
// 1.025, not 1.02).
func apart(v, limit float64, decimals int) string {
	for d := decimals; ; d++ {
		s := strconv.FormatFloat(v, 'f', d, 64)
		if v == limit || d == decimals+2 || s != strconv.FormatFloat(limit, 'f', d, 64) {
			return s
		}
	}
}

// floorRatio returns the floor cell of t's row: its floor row over its base
// row, "" for a target without a floor row.
func (t target) floorRatio(res results) string {
	if t.floor == "" {
		return ""
	}
	floor, ok1 := res.get(t.floor, t.unit)
	base, ok2 := res.get(t.base, t.unit)
	if !ok1 || !ok2 || base == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.2fx", floor/base)
}

func main() {
	cmd := flag.String("cmd", "", "the command that produced the input")
	machine := flag.String("machine", "", "a line describing the machine")
	floorsOnly := flag.Bool("floors", false, "write the store floor targets and table alone (scripts/floor-ratios.sh)")
	flag.Parse()
	in := os.Stdin
	if flag.NArg() == 1 {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			log.Fatal(err)
		}
		in = f
	}
	res, order, header := parse(in)
	_ = in.Close() // read to its end
	w := bufio.NewWriter(os.Stdout)
	if *floorsOnly {
		writeFloors(w, res)
		if err := w.Flush(); err != nil {
			log.Fatalf("benchreport: writing the floors: %v", err)
		}
		return
	}

	fmt.Fprintf(w, "# Benchmarks\n\nGenerated by `make bench` (scripts/bench.sh); do not edit by hand.\n\n")
	fmt.Fprintf(w, "Command:\n\n```\n%s\n```\n\nMachine: %s\n\n```\n%s\n```\n\n", *cmd, *machine, strings.Join(header, "\n"))
	fmt.Fprintf(w, "Every figure is the median over the runs. Ratios compare rows of the same run.\n\n")
	var current, earlier []target
	for _, t := range targets() {
		if t.earlier {
			earlier = append(earlier, t)
		} else {
			current = append(current, t)
		}
	}
	fmt.Fprintf(w, "## Targets\n\nThe performance targets. A ratio is the first row's median over the second's, both named in All results. The floor column, beside a memory row against bare, is the matching floor row (`floor-executed` or `floor-replay`, same callers and unit) over the same bare row: the least that any interceptor which stores and replays serialized answers adds (see the floor tables below).\n\n")
	writeTargets(w, res, current)
	fmt.Fprintf(w, "\n## Targets of earlier rounds\n\nStill measured, so that a change that undoes them shows.\n\n")
	writeTargets(w, res, earlier)
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
	fmt.Fprint(w, labNotes)
	// bench.sh writes BENCHMARKS.md from stdout: a write that fails (a
	// full disk) fails the run rather than leave a report cut short.
	if err := w.Flush(); err != nil {
		log.Fatalf("benchreport: writing the report: %v", err)
	}
}

// labNotes ends the report: what was learned measuring lives in the
// development guide, not beside the figures.
const labNotes = `
**Lab notes.** What bounds each target that is not met, before-and-after comparisons of the
Redis and hot-path work, and the profiles behind them are in
[docs/development.md](docs/development.md). The memory-vs-bare targets in instructions compare with
a bare row whose count doubled, in the runtime's stack walking, when the MySQL helpers joined the
integration binary ([the note](docs/development.md#the-bare-row-in-instructions-since-the-mysql-merge)):
they say nothing until that is understood; their time ratios stand.
`

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no** (see [the notes](docs/development.md))"
}

func format(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
