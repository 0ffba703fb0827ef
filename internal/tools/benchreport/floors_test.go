package main

import (
	"strings"
	"testing"
)

// TestFloorTargetsCompareEachStoreWithItsFloor: every store has, per path
// and callers, a target of its row over its own floor row of the same
// benchmark function (so of the same run), at most floorLimit.
func TestFloorTargetsCompareEachStoreWithItsFloor(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, tg := range floorTargets() {
		if tg.unit == "writes/op" {
			continue
		}
		if tg.base != strings.Replace(tg.got, "-", "-floor-", 1) || tg.atMost != floorLimit || !strings.Contains(tg.what, " vs its floor, callers=") {
			t.Errorf("target %q compares %q with %q, at most %v", tg.what, tg.got, tg.base, tg.atMost)
		}
		seen[tg.what] = true
	}
	for _, s := range storeFloors {
		for _, path := range []string{"executed", "replay"} {
			for _, c := range []string{"1", "64"} {
				if what := s.store + " " + path + " vs its floor, callers=" + c; !seen[what] {
					t.Errorf("no target %q", what)
				}
			}
		}
	}
}

// TestWriteFloors: the floor report holds each ratio against its floor
// row, the SQLite write counts, and "not measured" for a row missing.
func TestWriteFloors(t *testing.T) {
	t.Parallel()
	res, _, _ := parse(strings.NewReader(`
BenchmarkUnarySQLite/sqlite-floor-replay/callers=1-2 	 100	 100000 ns/op	 0 writes/op
BenchmarkUnarySQLite/sqlite-replay/callers=1-2 	 100	 110000 ns/op	 0 writes/op
BenchmarkUnarySQLite/sqlite-floor-executed/callers=1-2 	 100	 500000 ns/op	 2 writes/op
BenchmarkUnarySQLite/sqlite-executed/callers=1-2 	 100	 600000 ns/op	 3 writes/op
BenchmarkUnary/redis-floor-replay/callers=64-2 	 100	 40000 ns/op
BenchmarkUnary/redis-replay/callers=64-2 	 100	 30000 ns/op
`))
	var b strings.Builder
	writeFloors(&b, res)
	for _, want := range []string{
		"| sqlite replay vs its floor, callers=1 | 1.10x | <= 1.15x | yes |\n",
		"| sqlite executed vs its floor, callers=1 | 1.20x | <= 1.15x | **no** (see [the notes](docs/development.md)) |\n",
		"| redis replay vs its floor, callers=64 | 0.75x | <= 1.15x | yes |\n",
		"| mysql executed vs its floor, callers=1 | not measured | | |\n",
		"| writes per call, sqlite-replay, callers=1 | 0 | = 0 | yes |\n",
		"| writes per call, sqlite-executed, callers=1 | 3 | = 2 | **no** (see [the notes](docs/development.md)) |\n",
		"| row | ns/op | writes/op | B/op | allocs/op | time vs floor |\n",
		"| `sqlite-replay/callers=1` | 110000 | 0 | – | – | 1.10x |\n",
		"| `sqlite-floor-replay/callers=1` | 100000 | 0 | – | – | 1.00x |\n",
		"| `sqlite-ceiling-replay/callers=1` | – | – | – | – | not measured |\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("floor report lacks %q:\n%s", want, b.String())
		}
	}
}
