package memorystore

import (
	"testing"
	"unsafe"
)

// Shards sit side by side in an array, each locked on its own: a shard that
// shares a cache line with its neighbour, or with the store's counters,
// slows both down. (A state takes over 4 KiB, so its size class, and so its
// address, is a multiple of 64.)
func TestShardSize(t *testing.T) {
	t.Parallel()
	if size := unsafe.Sizeof(shard{}); size%64 != 0 {
		t.Fatalf("a shard takes %d bytes, not a whole number of 64-byte cache lines", size)
	}
	if off := unsafe.Offsetof(state{}.shards); off%64 != 0 {
		t.Fatalf("the shards start at byte %d of the state, not on a cache line of their own", off)
	}
}

// An entry takes 88 bytes, in a map slot beside its 16-byte key header:
// 16 more than before it kept its claim and completion times for
// Inspector (two int64s), about 2% of a completed entry with a 200-byte
// outcome (BenchmarkScale's B/record). A change of size must be a choice.
func TestEntrySize(t *testing.T) {
	t.Parallel()
	if size := unsafe.Sizeof(entry{}); size != 88 {
		t.Fatalf("an entry takes %d bytes, want 88", size)
	}
}
