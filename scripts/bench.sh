#!/usr/bin/env bash
# Runs the benchmark suite and rewrites BENCHMARKS.md from its output.
# Redis rows need redis-server (apt-get install redis-server redis-tools);
# PostgreSQL rows a server at IDEMPOTENCY_POSTGRES_URL, MySQL rows one at
# IDEMPOTENCY_MYSQL_URL (see .ci/run);
# BenchmarkWatermill's rabbitmq rows a RabbitMQ at IDEMPOTENCY_RABBITMQ_URL;
# the instruction counts (scripts/bench-instructions.sh) valgrind
# (apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

# Checked first, so that a missing valgrind does not end a run only after
# the long benchmarks.
command -v valgrind >/dev/null || {
	echo "bench.sh: valgrind is required for scripts/bench-instructions.sh (apt-get install valgrind)" >&2
	exit 1
}

# Every size is measured: under -short (CI's smoke) a benchmark fills
# 1,000 entries, not a million (internal/test/benchtest), and GOFLAGS
# would pass it to every go test below.
case " ${GOFLAGS:-} " in
*" -short "* | *" -short=true "* | *" -test.short "* | *" -test.short=true "*)
	echo "bench.sh: GOFLAGS=$GOFLAGS has -short, under which the benchmarks fill small stores: unset it" >&2
	exit 1
	;;
esac

count=${BENCH_COUNT:-5}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# The rows of cmd1 run first, in a process of their own: the PostgreSQL
# rows leave the server busy for a while after them (checkpoints,
# autovacuum), which would take CPU from the rows measured next.
# BenchmarkUnary and BenchmarkUnaryPostgres are in the integration module;
# the client benchmarks, BenchmarkDo (Do and Once), BenchmarkStream and
# BenchmarkClientStream in the root package, BenchmarkMiddleware and
# BenchmarkTransport in httpidempotency, BenchmarkConnect in
# connectidempotency; go test runs the benchmarks of several packages one
# after the other.
# BenchmarkClaimCompleted (PostgreSQL replays) runs after the memory store's
# rows and before BenchmarkPostgresScale, which fills its table before it
# measures anything.
cmd1="go test -run '^\$' -bench '^(BenchmarkUnary|BenchmarkClientCall|BenchmarkClientInterceptor|BenchmarkDo|BenchmarkStream|BenchmarkClientStream|BenchmarkMiddleware|BenchmarkTransport|BenchmarkConnect)\$' -benchmem -benchtime=1s -count=$count . ./httpidempotency ./connectidempotency ./integration"
cmd1p="go test -run '^\$' -bench '^BenchmarkUnaryPostgres\$' -benchmem -benchtime=1s -count=$count ./integration"
# BenchmarkUnaryMySQL in a process of its own too, for the same reason.
cmd1m="go test -run '^\$' -bench '^BenchmarkUnaryMySQL\$' -benchmem -benchtime=1s -count=$count ./integration"
# BenchmarkUnarySQLite (the SQLite store against its floor) in a process
# of its own: its rows fsync a database file at every write.
cmd1s="go test -run '^\$' -bench '^BenchmarkUnarySQLite\$' -benchmem -benchtime=1s -count=$count ./integration"
cmd2="go test -run '^\$' -bench '^(BenchmarkScale|BenchmarkClaimFullSteadyExpiry|BenchmarkClaimComplete|BenchmarkClaimExisting|BenchmarkBaselineGlobalMutexMap)\$' -benchmem -benchtime=300000x -count=$count ./store/memorystore"
cmd2p="go test -run '^\$' -bench '^BenchmarkClaimCompleted\$' -benchmem -benchtime=1s -count=$count ./store/postgresstore"
cmd2m="go test -run '^\$' -bench '^BenchmarkClaimCompletedMySQL\$' -benchmem -benchtime=1s -count=$count ./store/mysqlstore"
cmd3="go test -run '^\$' -bench '^BenchmarkPostgresScale\$' -benchtime=3000x -count=$count ./store/postgresstore"
cmd4="go test -run '^\$' -bench '^BenchmarkMemoryPerRecord\$' -benchtime=100000x -count=$count ./store/redisstore"
# BenchmarkUnaryInstructions: instructions per call of BenchmarkUnary's
# rows, counted under cachegrind (a deterministic figure beside the
# wall-clock ones, which move by tens of percent on 2 shared cores).
cmd5="scripts/bench-instructions.sh"
# The message consumers against bare consumers: BenchmarkJetStream (an
# embedded NATS server), BenchmarkKafka (franz-go's in-process cluster),
# BenchmarkWatermill (RabbitMQ, and watermill's in-process pub/sub), each a
# fixed number of messages per row, published before the timer starts.
cmd6="go test -run '^\$' -bench '^(BenchmarkJetStream|BenchmarkKafka|BenchmarkWatermill)\$' -benchmem -benchtime=5000x -count=$count ./jetstreamidempotency ./kafkaidempotency ./watermillidempotency"
# Inspection (the admin service's and idempotencyctl's reads) on a store of
# 1,000,000 entries: a List page of 100, a Lookup and Stats, with their p50
# and p99 latency; each run fills its store first, so fewer runs. Every
# store's BenchmarkInspectXxx, in the packages that declare one.
cmd7="go test -run '^\$' -bench '^BenchmarkInspect' -benchmem -count=3 $(scripts/bench-packages.sh BenchmarkInspect | tr '\n' ' ' | sed 's/ $//')"
export IDEMPOTENCY_REQUIRE_REDIS=1 IDEMPOTENCY_REQUIRE_POSTGRES=1 IDEMPOTENCY_REQUIRE_MYSQL=1 IDEMPOTENCY_REQUIRE_RABBITMQ=1
eval "$cmd1" | tee -a "$out"
eval "$cmd1p" | tee -a "$out"
eval "$cmd1m" | tee -a "$out"
eval "$cmd1s" | tee -a "$out"
eval "$cmd2" | tee -a "$out"
eval "$cmd2p" | tee -a "$out"
eval "$cmd2m" | tee -a "$out"
eval "$cmd3" | tee -a "$out"
eval "$cmd4" | tee -a "$out"
eval "$cmd5" | tee -a "$out"
eval "$cmd6" | tee -a "$out"
eval "$cmd7" | tee -a "$out"

machine="$(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(go version | cut -d' ' -f3-), redis $(redis-server --version | cut -d' ' -f3), PostgreSQL $(psql "${IDEMPOTENCY_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}" -Atc 'SHOW server_version' | cut -d' ' -f1), $(go run ./internal/tools/backends | sed -n 's/^mysql: found \(.*\) at .*/\1/p')"
go run ./internal/tools/benchreport -cmd "$cmd1
$cmd1p
$cmd1m
$cmd1s
$cmd2
$cmd2p
$cmd2m
$cmd3
$cmd4
$cmd5
$cmd6
$cmd7" -machine "$machine" "$out" > BENCHMARKS.md
echo "BENCHMARKS.md rewritten"
