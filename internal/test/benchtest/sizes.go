package benchtest

import (
	"slices"
	"testing"
)

// ShortSize is the most entries a benchmark fills a store with under
// -short: CI's smoke (.ci/run) runs every benchmark once with -short, and
// a store of a million entries takes longer to fill than everything else
// it runs; make bench (scripts/bench.sh) runs without -short, at every
// size.
const ShortSize = 1_000

// Size returns n, or [ShortSize] when it is smaller under -short: the
// number of entries a benchmark fills its store with before it measures.
func Size(n int) int {
	if testing.Short() {
		return min(n, ShortSize)
	}
	return n
}

// Sizes returns sizes, or under -short only those of them that are at most
// [ShortSize]: the store sizes a benchmark measures one row each at.
func Sizes(sizes ...int) []int {
	if !testing.Short() {
		return sizes
	}
	return slices.DeleteFunc(slices.Clone(sizes), func(n int) bool { return n > ShortSize })
}
