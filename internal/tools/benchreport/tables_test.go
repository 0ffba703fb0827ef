package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestComparisonsCompareWithBareRowsOfTheirTable(t *testing.T) {
	t.Parallel()
	for _, c := range comparisons() {
		if len(c.rows) == 0 {
			t.Errorf("table %q has no rows", c.title)
		}
		for _, r := range c.rows {
			if !strings.HasPrefix(r.name, c.bench+"/") || !strings.HasPrefix(r.base, c.bench+"/") {
				t.Errorf("table %q of %s: row %q compares with %q", c.title, c.bench, r.name, r.base)
			}
			if !slices.Contains(c.rows, row{r.base, r.base}) {
				t.Errorf("table %q: row %q compares with %q, which is not a bare row of the table", c.title, r.name, r.base)
			}
		}
	}
}

func TestComparisonRatiosAgainstTheBareRow(t *testing.T) {
	t.Parallel()
	res, _, _ := parse(strings.NewReader(`
BenchmarkStream/bare-2     	 100	 1000 ns/op	 100000 msgs/s	 10 B/op	 1 allocs/op
BenchmarkStream/bare-2     	 100	 3000 ns/op	 33333 msgs/s	 10 B/op	 1 allocs/op
BenchmarkStream/bare-2     	 100	 2000 ns/op	 50000 msgs/s	 10 B/op	 1 allocs/op
BenchmarkStream/executed-2 	 100	 5000 ns/op	 20000 msgs/s	 4096 B/op	 50 allocs/op
BenchmarkDo/bare/callers=1-2 	 100	 70 ns/op	 96 B/op	 1 allocs/op
BenchmarkDo/do-replay/callers=1-2 	 100	 3500 ns/op	 1648 B/op	 17 allocs/op
BenchmarkUnary/bare/callers=64-2 	 100	 10000 ns/op	 5000 B/op	 90 allocs/op
BenchmarkUnary/floor-replay/callers=64-2 	 100	 10500 ns/op	 5600 B/op	 99 allocs/op
BenchmarkUnary/memory-executed/callers=64-2 	 100	 12000 ns/op	 11000 B/op	 160 allocs/op
BenchmarkUnary/memory-sealed-executed/callers=64-2 	 100	 12600 ns/op	 11500 B/op	 163 allocs/op
BenchmarkUnaryInstructions/bare/callers=64	1	200000 instr/op
BenchmarkUnaryInstructions/memory-replay/callers=1	1	220000 instr/op
BenchmarkUnaryInstructions/memory-sealed-replay/callers=1	1	231000 instr/op
BenchmarkUnaryInstructions/floor-replay/callers=64	1	215000 instr/op
BenchmarkUnaryInstructions/redis-replay-cached/callers=64	1	260000 instr/op
`))
	var out strings.Builder
	writeComparisons(&out, res)
	for _, want := range []string{
		"| row | ns/op | msgs/s | B/op | allocs/op | time vs bare |\n|---|---|---|---|---|---|\n",
		"| `bare` | 2000 | 50000 | 10 | 1 | 1.00x |\n",            // the medians
		"| `executed` | 5000 | 20000 | 4096 | 50 | 2.50x |\n",     // over the bare median
		"| `replayed` | – | – | – | – | not measured |\n",         // a row the run lacks
		"| row | ns/op | B/op | allocs/op | time vs bare |\n",     // no rate column
		"| `do-replay/callers=1` | 3500 | 1648 | 17 | 50.00x |\n", // against bare of its callers
		"| `do-replay/callers=64` | – | – | – | not measured |\n",
		"| `floor-replay/callers=64` | 10500 | 5600 | 99 | 1.05x |\n", // the floor table, in ns/op
		"| `floor-replay/callers=1` | – | – | – | not measured |\n",
		"| row | instr/op | instr/op vs bare |\n|---|---|---|\n", // the unit shown, no B/op or allocs/op
		"| `floor-replay/callers=64` | 215000 | 1.07x |\n",
		"| `redis-replay-cached/callers=64` | 260000 | 1.30x |\n",
		"| `memory-replay/callers=64` | – | not measured |\n",
		"| `memory-executed/callers=64` | 12000 | 11000 | 160 | 1.20x |\n", // the floor table, against bare
		"| row | ns/op | B/op | allocs/op | time vs unsealed |\n",          // the sealing tables
		"| `memory-executed/callers=64` | 12000 | 11000 | 160 | 1.00x |\n", // against itself
		"| `memory-sealed-executed/callers=64` | 12600 | 11500 | 163 | 1.05x |\n",
		"| `memory-sealed-replay/callers=64` | – | – | – | not measured |\n",
		"| row | instr/op | instr/op vs unsealed |\n|---|---|---|\n",
		"| `memory-sealed-replay/callers=1` | 231000 | 1.05x |\n",
		"| `memory-sealed-executed/callers=1` | – | not measured |\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, out.String())
		}
	}
}

// derived are the benchmarks that a script run by scripts/bench.sh prints
// rather than go test: each with the script, and the benchmark of go test
// whose rows the script measures.
var derived = map[string]struct{ script, of string }{
	"BenchmarkUnaryInstructions": {"scripts/bench-instructions.sh", "BenchmarkUnary"},
}

// Every benchmark of the report is run by make bench, and every benchmark
// of a comparison table once by the CI smoke, so a benchmark that stops
// running, or is renamed, fails CI instead of leaving a table empty. The
// smoke runs every benchmark the test files declare (-bench .), so a
// table's benchmark must be declared by one. A derived benchmark's rows
// must be among those its script measures, and the benchmark it measures
// must be declared. The smoke runs with -short; make bench must not.
func TestScriptsRunEveryBenchmarkReported(t *testing.T) {
	t.Parallel()
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	bench, ci := read("../../../scripts/bench.sh"), read("../../../.ci/run")
	// The smoke: every benchmark of the packages whose test files declare
	// one, once.
	if !strings.Contains(ci, "bench_pkgs=$(scripts/bench-packages.sh)") ||
		!regexp.MustCompile(`go test -short -run '\^\$' -bench \. -benchtime=1x \$bench_pkgs`).MatchString(ci) {
		t.Fatal(".ci/run's benchmark smoke no longer runs every benchmark (-bench . over $bench_pkgs)")
	}
	// make bench measures at full size: under -short a benchmark fills
	// 1,000 entries, not a million (internal/test/benchtest), and
	// BENCHMARKS.md would show the figures of the small store under the
	// large one's name. A command is a line of go test or of a test binary
	// (-test.run), its continuation lines joined, outside a comment.
	short := regexp.MustCompile(`(?m)^[^#\n]*(\bgo test\b|\s-test\.run\b)[^\n]*\s-(test\.)?short\b`)
	for _, script := range []string{"scripts/bench.sh", derived["BenchmarkUnaryInstructions"].script} {
		if short.MatchString(strings.ReplaceAll(read("../../../"+script), "\\\n", " ")) {
			t.Errorf("%s runs a benchmark with -short: make bench must measure every size", script)
		}
	}
	declared := declaredBenchmarks(t, "../../..")
	runs := func(script, name string) bool {
		return regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(script)
	}
	// prefixes are the -bench '^BenchmarkX' of bench.sh without a $: each
	// runs every benchmark declared whose name starts with it.
	prefixes := regexp.MustCompile(`-bench '\^(Benchmark\w*)'`).FindAllStringSubmatch(bench, -1)
	benchRuns := func(name string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p[1]) && declared[name] {
				return true
			}
		}
		return runs(bench, name)
	}
	top := func(name string) string { return strings.Split(name, "/")[0] }
	// missing returns why bench.sh does not give the row name, or "".
	missing := func(name string) string {
		d, ok := derived[top(name)]
		if !ok {
			if !benchRuns(top(name)) {
				return "scripts/bench.sh does not run " + top(name)
			}
			return ""
		}
		if !runs(bench, d.script) {
			return "scripts/bench.sh does not run " + d.script
		}
		script := read("../../../" + d.script)
		if !runs(script, top(name)) || !runs(script, d.of) {
			return d.script + " does not print " + top(name) + " from " + d.of
		}
		// bench-instructions.sh: rows=${ROWS:-<rows>} and for callers in <counts>.
		rows := regexp.MustCompile(`rows=\$\{ROWS:-([^}]*)\}`).FindStringSubmatch(script)
		callers := regexp.MustCompile(`for callers in ([0-9 ]+);`).FindStringSubmatch(script)
		parts := strings.Split(name, "/")
		if rows == nil || callers == nil || len(parts) != 3 ||
			!slices.Contains(strings.Fields(rows[1]), parts[1]) ||
			!slices.Contains(strings.Fields(callers[1]), strings.TrimPrefix(parts[2], "callers=")) {
			return d.script + " does not measure " + name
		}
		return ""
	}
	for _, tg := range targets() {
		for _, name := range []string{tg.got, tg.base, tg.floor} {
			if name == "" {
				continue
			}
			if why := missing(name); why != "" {
				t.Errorf("target %q reads %s: %s", tg.what, name, why)
			}
		}
	}
	for _, c := range comparisons() {
		for _, r := range c.rows {
			if why := missing(r.name); why != "" {
				t.Errorf("table %q shows %s: %s", c.title, r.name, why)
			}
		}
		smoke := c.bench
		if d, ok := derived[c.bench]; ok {
			smoke = d.of
		}
		if !declared[smoke] {
			t.Errorf("no test file declares %s, which .ci/run's benchmark smoke would run", smoke)
		}
	}
}

// declaredBenchmarks returns the names of the benchmarks that the test
// files under root declare (func BenchmarkX(b *testing.B)).
func declaredBenchmarks(t *testing.T, root string) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func (Benchmark\w*)\(\w+ \*testing\.B\)`)
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("found no benchmark declared under %s", root)
	}
	return names
}
