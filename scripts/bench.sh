#!/usr/bin/env bash
# Runs the benchmark suite and rewrites BENCHMARKS.md from its output.
# Redis rows need redis-server (apt-get install redis-server redis-tools);
# PostgreSQL rows a server at IDEMPOTENCY_POSTGRES_URL (see .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

count=${BENCH_COUNT:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# BenchmarkUnary runs first, in a process of its own: the PostgreSQL rows
# leave the server busy for a while after them (checkpoints, autovacuum),
# which would take CPU from the rows measured next.
# BenchmarkUnary and BenchmarkUnaryPostgres are in the integration module,
# the client benchmarks in the root package; go test runs the benchmarks of
# two packages one after the other.
cmd1="go test -run '^\$' -bench '^(BenchmarkUnary|BenchmarkClientCall|BenchmarkClientInterceptor)\$' -benchmem -benchtime=1s -count=$count . ./integration"
cmd1p="go test -run '^\$' -bench '^BenchmarkUnaryPostgres\$' -benchmem -benchtime=1s -count=$count ./integration"
cmd2="go test -run '^\$' -bench '^(BenchmarkScale|BenchmarkClaimFullSteadyExpiry|BenchmarkClaimComplete|BenchmarkClaimExisting|BenchmarkBaselineGlobalMutexMap)\$' -benchmem -benchtime=300000x -count=$count ./store/memorystore"
cmd3="go test -run '^\$' -bench '^BenchmarkPostgresScale\$' -benchtime=3000x -count=$count ./store/postgresstore"
cmd4="go test -run '^\$' -bench '^BenchmarkMemoryPerRecord\$' -benchtime=100000x -count=$count ./store/redisstore"
export IDEMPOTENCY_REQUIRE_REDIS=1 IDEMPOTENCY_REQUIRE_POSTGRES=1
eval "$cmd1" | tee -a "$out"
eval "$cmd1p" | tee -a "$out"
eval "$cmd2" | tee -a "$out"
eval "$cmd3" | tee -a "$out"
eval "$cmd4" | tee -a "$out"

machine="$(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(go version | cut -d' ' -f3-), redis $(redis-server --version | cut -d' ' -f3), PostgreSQL $(psql "${IDEMPOTENCY_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}" -Atc 'SHOW server_version' | cut -d' ' -f1)"
go run ./internal/benchreport -cmd "$cmd1
$cmd1p
$cmd2
$cmd3
$cmd4" -machine "$machine" "$out" > BENCHMARKS.md
echo "BENCHMARKS.md rewritten"
