package memorystore

import (
	"runtime"
	"time"
)

// sweepBatch bounds the heap items the sweeper and makeRoom visit per hold
// of a shard's lock.
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
			st.sweep()
		}
	}
}

// sweep removes every expired entry, one shard at a time. It stops early
// when the store is closed.
func (st *state) sweep() {
	for i := range st.shards {
		select {
		case <-st.stop:
			return
		default:
		}
		st.sweepShard(&st.shards[i])
	}
}

// sweepShard removes the expired entries of sh, earliest first, holding its
// lock for at most sweepBatch of them at a time.
func (st *state) sweepShard(sh *shard) {
	for {
		now := st.now()
		if sh.next.Load() > now {
			return // nothing has expired
		}
		sh.mu.Lock()
		_, more := st.drop(sh, now, sweepBatch, 0)
		sh.mu.Unlock()
		if !more {
			return
		}
		runtime.Gosched() // let callers waiting on the shard in
	}
}

// drop removes the expired entries of sh, earliest first, visiting at most
// limit heap items, and uncounts all but keep of them (keep is room the
// caller takes for itself). It returns how many it removed and whether it
// stopped at limit. The caller holds sh.mu.
func (st *state) drop(sh *shard, now int64, limit, keep int) (n int, more bool) {
	n, more = sh.popExpired(now, limit)
	if n > 0 {
		st.free(n - min(keep, n))
	}
	sh.settle() // after free: see makeRoom
	return n, more
}
