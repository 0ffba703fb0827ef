#!/usr/bin/env bash
# Runs every store's rows beside its floor rows (integration's
# BenchmarkUnary redis rows, BenchmarkUnaryPostgres, BenchmarkUnaryMySQL,
# BenchmarkUnarySQLite), each benchmark function in a process of its own,
# and prints each interceptor row over its floor row of the same run
# against the 1.15x targets (go run ./internal/tools/benchreport -floors),
# then benchstat's summary of the rows when benchstat is installed
# (GOFLAGS= go install golang.org/x/perf/cmd/benchstat@latest).
#
#	make bench-floor                         # BENCH_COUNT=6, BENCH_TIME=1s
#	BENCH_COUNT=10 BENCH_TIME=2s scripts/floor-ratios.sh
#	FLOOR_OUT=floor.txt scripts/floor-ratios.sh   # keep the raw output
#
# Needs redis-server, and PostgreSQL and MySQL at IDEMPOTENCY_POSTGRES_URL
# and IDEMPOTENCY_MYSQL_URL (see .ci/run). On a shared machine, run it
# alone: the ratios compare rows seconds apart.
set -euo pipefail
cd "$(dirname "$0")/.."

count=${BENCH_COUNT:-6}
benchtime=${BENCH_TIME:-1s}
out=${FLOOR_OUT:-$(mktemp)}
[ -n "${FLOOR_OUT:-}" ] || trap 'rm -f "$out"' EXIT
: >"$out"

export IDEMPOTENCY_REQUIRE_REDIS=1 IDEMPOTENCY_REQUIRE_POSTGRES=1 IDEMPOTENCY_REQUIRE_MYSQL=1
rows='(executed|replay|floor-executed|floor-replay|ceiling-executed|ceiling-replay)'
for bench in "BenchmarkUnary/redis" "BenchmarkUnaryPostgres/postgres" "BenchmarkUnaryMySQL/mysql" "BenchmarkUnarySQLite/sqlite"; do
	fn=${bench%%/*} store=${bench#*/}
	go test -run '^$' -bench "^$fn\$/^$store-$rows\$" -benchmem -benchtime="$benchtime" -count="$count" ./integration | tee -a "$out"
done

echo
go run ./internal/tools/benchreport -floors "$out"
if command -v benchstat >/dev/null; then
	echo
	benchstat "$out"
fi
