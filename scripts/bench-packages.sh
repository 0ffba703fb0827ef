#!/usr/bin/env bash
# Prints the packages, as ./dir (. for the root), whose test files declare
# a benchmark whose name starts with the prefix given (Benchmark, every
# benchmark, when none is), one a line. The list is read from the
# repository's files, so a module's benchmarks join CI's smoke (.ci/run)
# and a kind every store has (BenchmarkInspect in scripts/bench.sh) without
# an edit there.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=${1:-Benchmark}
git grep -lE "^func ${prefix}[A-Za-z0-9_]*\([A-Za-z_][A-Za-z0-9_]* \*testing\.B\)" -- '*_test.go' ':!:**/testdata/**' |
  xargs -r -n1 dirname | sort -u | awk '{ print ($0 == "." ? "." : "./" $0) }'
