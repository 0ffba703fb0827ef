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
