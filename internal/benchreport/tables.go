package main

import (
	"fmt"
	"io"
	"strings"
)

// comparison is one table of BENCHMARKS.md: the rows of one benchmark, each
// with its time per operation as a ratio to a bare row of the same run.
type comparison struct {
	title string // the heading, naming the benchmark
	about string // what the bare row is and what an operation is
	rate  string // a rate metric the rows report ("msgs/s"), shown in a column of its own; "" for none
	bench string // the benchmark's name, which the rows' names start with
	rows  []row
}

// row is one line of a comparison: a benchmark, and the bare row its time
// per operation is divided by (itself for a bare row).
type row struct{ name, base string }

// comparisons returns the tables of the entry points against their bare
// baselines.
func comparisons() []comparison {
	do := comparison{
		title: "`Do` and `Once` against calling the function (`BenchmarkDo`)",
		about: "Bare calls the function directly; the other rows run it through `Do` or `Once` on a memory store, with a new key per call (executed) or one stored key (replay). An operation is one call; as the function does almost nothing, the difference in ns/op is what `Do` or `Once` adds.",
		bench: "BenchmarkDo",
	}
	mw := comparison{
		title: "`httpidempotency.Middleware` against the bare handler (`BenchmarkMiddleware`)",
		about: "Server rows send each request to an httptest server over loopback TCP (net/http's client and server and the network stack included); recorder rows call `ServeHTTP` with an `httptest.ResponseRecorder`, no network, so the middleware's own cost stands out. Each row compares with the bare handler of the same way. Memory store; an operation is one request.",
		bench: "BenchmarkMiddleware",
	}
	for _, callers := range []string{"1", "64"} {
		do.rows = append(do.rows, variants("BenchmarkDo/", "/callers="+callers, "bare", "do-executed", "do-replay", "once-executed", "once-replay")...)
		for _, way := range []string{"server", "recorder"} {
			mw.rows = append(mw.rows, variants("BenchmarkMiddleware/"+way+"/", "/callers="+callers, "bare", "executed", "replay")...)
		}
	}
	stream := comparison{
		title: "Server streams against a bare stream (`BenchmarkStream`)",
		about: "A server stream of 100 messages of 64 bytes over bufconn; bare has no interceptor, executed runs under a new key (each message recorded, the outcome stored in a memory store), replayed is sent from the store. An operation is one whole stream; msgs/s counts the messages received.",
		rate:  "msgs/s",
		bench: "BenchmarkStream",
		rows:  variants("BenchmarkStream/", "", "bare", "executed", "replayed"),
	}
	pg := comparison{
		title: "PostgreSQL replays: a claim of a completed key against a SELECT (`BenchmarkClaimCompleted`)",
		about: "One completed key claimed again and again (the store step of a replay); the bare row is a plain `SELECT` of the row, claim-old the claim statement before the replay became a read (decision 50 of `docs/semantics.md`), on a table of its own. The paired row, in All results, alternates a SELECT and a claim and gives their median latencies and `claim/select`.",
		rate:  "ops/s",
		bench: "BenchmarkClaimCompleted",
	}
	for _, g := range []string{"1", "16"} {
		pg.rows = append(pg.rows, variants("BenchmarkClaimCompleted/goroutines="+g+"/", "", "select", "claim", "claim-old")...)
	}
	return []comparison{do, mw, stream, pg}
}

// variants returns the rows prefix+v+suffix for each of vs, each compared
// with the first.
func variants(prefix, suffix string, vs ...string) []row {
	rows := make([]row, len(vs))
	for i, v := range vs {
		rows[i] = row{prefix + v + suffix, prefix + vs[0] + suffix}
	}
	return rows
}

// writeComparisons writes every table of comparisons with the medians of res.
func writeComparisons(w io.Writer, res results) {
	fmt.Fprintf(w, "\n## Entry points against their bare baselines\n\n")
	fmt.Fprintf(w, "Each row's time per operation is divided by its bare row's, measured in the same run: 1.50x takes half as long again.\n")
	for _, c := range comparisons() {
		fmt.Fprintf(w, "\n### %s\n\n%s\n\n", c.title, c.about)
		head, rule := "| row | ns/op |", "|---|---|"
		if c.rate != "" {
			head, rule = head+" "+c.rate+" |", rule+"---|"
		}
		fmt.Fprintf(w, "%s B/op | allocs/op | time vs bare |\n%s---|---|---|\n", head, rule)
		for _, r := range c.rows {
			cells := []string{"`" + strings.TrimPrefix(r.name, c.bench+"/") + "`", metric(res, r.name, "ns/op")}
			if c.rate != "" {
				cells = append(cells, metric(res, r.name, c.rate))
			}
			cells = append(cells, metric(res, r.name, "B/op"), metric(res, r.name, "allocs/op"), ratio(res, r))
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		}
	}
}

// metric returns the median of one metric of a row, or "–" when the row
// did not report it.
func metric(res results, name, unit string) string {
	v, ok := res.get(name, unit)
	if !ok {
		return "–"
	}
	return format(v)
}

// ratio returns r's time per operation over its bare row's, or "not
// measured" when either is missing.
func ratio(res results, r row) string {
	got, ok1 := res.get(r.name, "ns/op")
	base, ok2 := res.get(r.base, "ns/op")
	if !ok1 || !ok2 || base == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.2fx", got/base)
}
