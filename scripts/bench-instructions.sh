#!/usr/bin/env bash
# Counts the instructions one call of BenchmarkUnary executes, row by row,
# under valgrind's cachegrind, and prints them as benchmark lines
# ("BenchmarkUnaryInstructions/<row>/callers=<n> 1 <count> instr/op") for
# internal/tools/benchreport. Wall-clock ratios on a shared 2-core machine move by
# tens of percent from run to run; instruction counts do not: with
# GOMAXPROCS=1 (one thread runs Go code, so no thread spins waiting for
# work) and asynchronous preemption off (valgrind cannot follow its
# signals), the same binary and row give the same count to within 0.5%.
# Each row runs twice, with $LOW and $HIGH calls; the difference divided
# by the difference in calls is the cost of one call, without the
# process's start, the servers' setup and the key stored before a replay
# row starts.
#
# What a count leaves out: time spent waiting (for Redis, PostgreSQL or
# the scheduler), cache misses, and instruction costs (valgrind does not
# offer the CPU's SHA extensions, so crypto/sha256 runs its AVX2 code and
# counts more instructions than it runs natively). Use it for the rows
# whose work is all in the process: bare, floor, memory (sealed and not),
# and the replay cache's hits.
set -euo pipefail
[[ -z ${BIN:-} ]] || BIN=$(realpath "$BIN")
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || {
	echo "bench-instructions.sh: valgrind is required (apt-get install valgrind)" >&2
	exit 1
}
LOW=${LOW:-3000}
HIGH=${HIGH:-9000}
rows=${ROWS:-bare floor-executed memory-executed memory-sealed-executed floor-replay memory-replay memory-sealed-replay redis-replay-cached postgres-replay-cached mysql-replay-cached}
# BIN, when set, is a test binary of the integration module to count
# instead of one built from this tree (to compare an older commit's).
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin=${BIN:-$dir/integration.test}
[[ -n ${BIN:-} ]] || (cd integration && go test -c -o "$bin" .)

# count ROW CALLERS N prints the instructions cachegrind counted for a
# run of N calls of ROW at CALLERS callers. (Cachegrind, not callgrind:
# callgrind trips an assertion on a signal that arrives while a test helper
# starts redis-server.)
#
# A count stands only for a run that ends with PASS: valgrind 3.19 does not
# know RDTSCP, which the runtime's cputicks uses when the CPU has it (a
# lock's spin, at random, killed about one run in ten with SIGILL, its
# count cut short), so cpu.rdtscp=off makes the runtime use RDTSC instead.
count() {
	local out
	out=$(cd integration && GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off \
		valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
		"$bin" -test.run '^$' \
		-test.bench "BenchmarkUnary/^$1\$/callers=$2\$" -test.benchtime="$3x" 2>&1) || true
	if ! grep -q '^PASS$' <<<"$out"; then
		echo "bench-instructions.sh: the run of $1 at $2 callers did not pass:" >&2
		grep -v '^==' <<<"$out" | tail -20 >&2
		return 1
	fi
	sed -n 's/.*I *refs: *//p' <<<"$out" | tr -d ,
}

for callers in 1 64; do
	for row in $rows; do
		low=$(count "$row" "$callers" "$LOW") || true
		high=$(count "$row" "$callers" "$HIGH") || true
		if [[ -z $low || -z $high ]]; then
			echo "bench-instructions.sh: cachegrind gave no count for $row at $callers callers" >&2
			exit 1
		fi
		printf 'BenchmarkUnaryInstructions/%s/callers=%s\t1\t%d instr/op\n' \
			"$row" "$callers" $(((high - low) / (HIGH - LOW)))
	done
done
