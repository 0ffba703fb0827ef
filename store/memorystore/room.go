package memorystore

import "math"

// A bounded store counts its entries in one word, state.room: the count in
// the low 32 bits, and in the high 32 bits a version that every change to
// the count bumps, and so does a claim that takes an expired entry in
// place. One load then tells makeRoom both whether the store is full and
// whether room came or went since it last looked.
const (
	countMask = 1<<32 - 1
	oneChange = 1 << 32
	// maxBound is the largest bound the count can hold.
	maxBound = math.MaxInt32
	// roomPasses bounds the passes of makeRoom over the shards.
	roomPasses = 8
)

// bounded reports whether the store counts its entries.
func (st *state) bounded() bool { return st.maxEntries > 0 }

// reserve counts a new entry, or reports false when the store is full.
func (st *state) reserve() bool {
	for {
		v := st.room.Load()
		if v&countMask >= st.maxEntries {
			return false
		}
		if st.room.CompareAndSwap(v, v+1+oneChange) {
			return true
		}
	}
}

// free uncounts n entries, removed or handed back (n may be 0: an expired
// entry was taken in place), and bumps the version. The caller holds the
// lock of their shard, and publishes the shard's next expiry only after:
// a makeRoom that sees the entries gone without taking the lock must also
// see the version move.
func (st *state) free(n int) {
	if st.bounded() {
		st.room.Add(oneChange - uint64(n))
	}
}

// remove deletes e, the entry under key in sh, and uncounts it. The caller
// holds sh.mu.
func (st *state) remove(sh *shard, key string, e entry) {
	sh.remove(key, e)
	st.free(1)
	sh.settle()
}

// makeRoom is called by a claim that found the bounded store full. It
// removes the expired entries of the first shard that has any, from the
// claim's own shard (start) on, and hands the room of one of them to the
// caller, which then holds one counted entry. It reads one atomic per
// shard, and locks only a shard whose heap says something may have
// expired: the cost is O(log n) per heap item it visits, never a walk over
// every entry. It works the same after Close.
//
// Other claims take expired entries and room while it looks, so a pass can
// miss an entry that expired in a shard it had passed. It reports false
// only after a pass during which the version did not move: the store was
// full, and nothing had expired, when that pass began. Under a storm of
// changes it gives up after roomPasses passes.
func (st *state) makeRoom(start uint64) bool {
	for range roomPasses {
		before := st.room.Load()
		if st.takeExpired(start) || st.reserve() {
			return true
		}
		if st.room.Load()>>32 == before>>32 {
			return false
		}
	}
	return false
}

// takeExpired makes one pass of makeRoom over the shards.
func (st *state) takeExpired(start uint64) bool {
	now := st.now()
	for i := range uint64(numShards) {
		sh := &st.shards[(start+i)%numShards]
		for more := true; more && sh.next.Load() <= now; {
			var n int
			sh.mu.Lock()
			n, more = st.drop(sh, now, sweepBatch, 1)
			sh.mu.Unlock()
			if n > 0 {
				return true
			}
		}
	}
	return false
}

// giveBack uncounts the room that makeRoom handed to a claim which did not
// need it after all. The caller holds the lock of the claim's shard.
func (st *state) giveBack(held bool) {
	if held {
		st.free(1)
	}
}

// reuse is called by a claim that replaces the expired entry under its own
// key: it gives back the room it held, if any, and in any case bumps the
// version, as an expired entry that makeRoom might be looking for is gone.
// The caller holds the lock of the claim's shard.
func (st *state) reuse(held bool) {
	n := 0
	if held {
		n = 1
	}
	st.free(n)
}
