package memorystore

import (
	"iter"
	"maps"
	"math"
	"runtime"
	"time"
)

// sweepBatch bounds the entries the sweeper visits per hold of a shard's
// lock.
const sweepBatch = 256

// sweepEvery runs the background sweeper until stop is closed.
func (st *state) sweepEvery(interval time.Duration) {
	defer close(st.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-st.stop:
			return
		case <-t.C:
			st.roomMu.Lock()
			st.sweep()
			st.roomMu.Unlock()
		}
	}
}

// makeRoom drops expired entries from a full store and reports whether
// there is room now. It scans only when something may have expired.
func (st *state) makeRoom() bool {
	st.roomMu.Lock()
	defer st.roomMu.Unlock()
	if st.count.Load() < st.maxEntries {
		return true // another caller made room or released an entry
	}
	if st.now() < st.earliest.Load() {
		return false // nothing has expired yet
	}
	st.sweep()
	return st.count.Load() < st.maxEntries
}

// sweep removes every expired entry, one shard at a time, and recomputes
// earliest. The caller holds roomMu. It stops early when the store is
// closed.
func (st *state) sweep() {
	if st.bounded() {
		st.earliest.Store(math.MaxInt64)
	}
	for i := range st.shards {
		select {
		case <-st.stop:
			if st.bounded() {
				st.earliest.Store(math.MinInt64) // unknown: scan next time
			}
			return
		default:
		}
		st.sweepShard(&st.shards[i])
	}
}

// sweepShard removes the expired entries of sh, holding its lock for at
// most sweepBatch entries at a time. Between two holds the map may change;
// Go's map iteration tolerates that, so every entry present for the whole
// walk is visited exactly once.
func (st *state) sweepShard(sh *shard) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.m) <= sweepBatch {
		now := st.now()
		for k, e := range sh.m {
			st.sweepEntry(sh, k, e, now)
		}
		return
	}
	next, stop := iter.Pull2(maps.All(sh.m))
	defer stop() // deferred calls run in reverse: stop runs under the lock
	for {
		now := st.now()
		for range sweepBatch {
			k, e, ok := next()
			if !ok {
				return
			}
			st.sweepEntry(sh, k, e, now)
		}
		sh.mu.Unlock()
		runtime.Gosched() // let callers waiting on the shard in
		sh.mu.Lock()
	}
}

// sweepEntry removes e if it has expired, and otherwise accounts for its
// expiry. The caller holds sh.mu.
func (st *state) sweepEntry(sh *shard, k string, e entry, now int64) {
	if e.expires <= now {
		delete(sh.m, k)
		st.forget()
		return
	}
	st.noteExpiry(e.expires)
}
