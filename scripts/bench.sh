#!/usr/bin/env bash
# Runs the benchmark suite and rewrites BENCHMARKS.md from its output.
# Redis rows need redis-server (apt-get install redis-server redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."

count=${BENCH_COUNT:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

cmd1="go test -run '^\$' -bench '^(BenchmarkUnary|BenchmarkClientCall|BenchmarkClientInterceptor)\$' -benchmem -benchtime=1s -count=$count ."
cmd2="go test -run '^\$' -bench '^(BenchmarkScale|BenchmarkClaimFullSteadyExpiry|BenchmarkClaimComplete|BenchmarkClaimExisting|BenchmarkBaselineGlobalMutexMap)\$' -benchmem -benchtime=300000x -count=$count ./store/memorystore"
export IDEMPOTENCY_REQUIRE_REDIS=1
eval "$cmd1" | tee -a "$out"
eval "$cmd2" | tee -a "$out"

machine="$(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(go version | cut -d' ' -f3-), $(redis-server --version | cut -d' ' -f3)"
go run ./internal/benchreport -cmd "$cmd1
$cmd2" -machine "$machine" "$out" > BENCHMARKS.md
echo "BENCHMARKS.md rewritten"
