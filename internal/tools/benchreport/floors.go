package main

import "io"

// The store floors (integration/floor_store_bench_test.go): each store's
// interceptor rows held to the rows of a bare handler that makes the
// store's least per call, measured in the same benchmark function.

// floorLimit is the most an interceptor row may cost over its store's
// floor row.
const floorLimit = 1.15

// storeFloor is a store whose rows have floor rows: the rows
// "<store>-executed", "<store>-replay", "<store>-floor-executed",
// "<store>-floor-replay" and "<store>-ceiling-*" of bench, which report
// count per call (the store's round trips, or SQLite's writes).
type storeFloor struct{ store, bench, count string }

// storeFloors are the stores held to their floors, each in the benchmark
// function that measures its rows.
var storeFloors = []storeFloor{
	{"redis", "BenchmarkUnary", "roundtrips/op"},
	{"postgres", "BenchmarkUnaryPostgres", "roundtrips/op"},
	{"mysql", "BenchmarkUnaryMySQL", "roundtrips/op"},
	{"sqlite", "BenchmarkUnarySQLite", "writes/op"},
}

// floorTargets returns each store's rows against its floor rows, per path
// and callers, and SQLite's writes per call: none for a replay (one read
// statement), the claim and the completion for an executed call.
func floorTargets() []target {
	var t []target
	for _, c := range []string{"1", "64"} {
		for _, s := range storeFloors {
			for _, path := range []string{"executed", "replay"} {
				row := func(name string) string { return s.bench + "/" + name + "/callers=" + c }
				t = append(t, target{
					what: s.store + " " + path + " vs its floor, callers=" + c,
					got:  row(s.store + "-" + path), base: row(s.store + "-floor-" + path),
					unit: "ns/op", atMost: floorLimit,
				})
			}
		}
		for _, w := range []struct {
			path   string
			writes float64
		}{{"executed", 2}, {"replay", 0}} {
			t = append(t, target{
				what: "writes per call, sqlite-" + w.path + ", callers=" + c,
				got:  "BenchmarkUnarySQLite/sqlite-" + w.path + "/callers=" + c, unit: "writes/op", equals: exactly(w.writes),
			})
		}
	}
	return t
}

// floorComparisons returns, per store, the table of its rows against its
// floor rows.
func floorComparisons() []comparison {
	var tables []comparison
	for _, s := range storeFloors {
		c := comparison{
			title:   s.store + " against its floor (`" + s.bench + "`)",
			about:   "The " + s.store + " rows of `" + s.bench + "` and its floor rows, measured in the same run; each row is divided by the floor row of its path and callers. " + floorAbout,
			rate:    s.count,
			bench:   s.bench,
			against: "floor",
		}
		for _, callers := range []string{"1", "64"} {
			for _, path := range []string{"executed", "replay"} {
				c.rows = append(c.rows, variants(s.bench+"/"+s.store+"-", "-"+path+"/callers="+callers, "floor", "ceiling")...)
				c.rows = append(c.rows, row{s.bench + "/" + s.store + "-" + path + "/callers=" + callers, s.bench + "/" + s.store + "-floor-" + path + "/callers=" + callers})
			}
		}
		tables = append(tables, c)
	}
	return tables
}

// floorAbout says what the floor rows are, in every store's table.
const floorAbout = "The bufconn unary calls of `BenchmarkUnary`, a new key per call (executed) or one stored key (replay). The floor rows are a bare gRPC handler, no interceptor, that makes the least a store-backed interceptor must make of the store, each step as the store's fastest native statement (`integration/floor_store_bench_test.go`): for a replay one read of the stored bytes (Redis GET; a prepared SELECT by key), whose bytes it decodes before it sets the replay marker; for an executed call the claim write (Redis SET NX PX; an INSERT that does nothing on a conflict), the handler's work and the completion write (Redis SET; an UPDATE by key). Each floor row knows its path, so it takes the cheapest for it (read-only for a replay, write-first for an executed call), which no one design can do for both: the floors are stricter than any store can reach. The ceiling rows run the interceptor's store steps with no gRPC. `make bench-floor` (scripts/floor-ratios.sh) prints these tables alone."

// writeFloors writes the floor targets and the floor table alone: what
// scripts/floor-ratios.sh prints.
func writeFloors(w io.Writer, res results) {
	writeTargets(w, res, floorTargets())
	for _, c := range floorComparisons() {
		writeComparison(w, res, c)
	}
}
