package memorystore

import (
	"maps"
	"math"
	"slices"
)

// shrinkMin is the fewest entries a shard must have held before its map is
// rebuilt smaller: below it the memory is not worth the copy.
const shrinkMin = 256

// A shard keeps one heap item per entry. An item's time may be earlier
// than its entry's expiry, never later: a claim that replaces an expired
// entry, an Extend or a Complete that moves the expiry later leaves the
// item where it is, and popExpired moves it when its time comes round.
// Only a change to an earlier expiry moves the item at once.

// add stores e under key, which sh does not hold. The caller holds sh.mu.
func (sh *shard) add(key string, e entry) {
	e.n = &node{key: key}
	sh.m[key] = e
	sh.exp.push(item{e.expires, e.n})
	sh.peak = max(sh.peak, len(sh.m))
	sh.noteNext()
}

// put stores e, which carries the node of the entry under key, in place of
// that entry. The caller holds sh.mu.
func (sh *shard) put(key string, e entry) {
	sh.m[key] = e
	if i := e.n.pos; e.expires < sh.exp[i].expires {
		sh.advance(i, e.expires)
	}
}

// advance moves the item at i up the heap to expires, earlier than its
// time. The caller holds sh.mu.
func (sh *shard) advance(i int, expires int64) {
	sh.exp[i].expires = expires
	sh.exp.up(i)
	sh.noteNext()
}

// remove deletes e, the entry under key; settle must follow. The caller
// holds sh.mu.
func (sh *shard) remove(key string, e entry) {
	sh.exp.removeAt(e.n.pos)
	delete(sh.m, key)
}

// popExpired deletes the entries that expired by now, earliest first, and
// returns how many it deleted. An item whose time came but whose entry
// expires later is moved to that expiry instead. It visits at most limit
// items, and reports whether it stopped for that reason. settle must
// follow. The caller holds sh.mu.
func (sh *shard) popExpired(now int64, limit int) (deleted int, more bool) {
	for visited := 0; len(sh.exp) > 0 && sh.exp[0].expires <= now; visited++ {
		if visited == limit {
			return deleted, true
		}
		root := sh.exp[0].n
		if e := sh.m[root.key]; e.expires > now {
			sh.exp[0].expires = e.expires
			sh.exp.down(0)
			continue
		}
		sh.exp.removeAt(0)
		delete(sh.m, root.key)
		deleted++
	}
	return deleted, false
}

// settle publishes the shard's next expiry and shrinks it if it is due,
// after entries were removed. The caller holds sh.mu.
func (sh *shard) settle() {
	sh.noteNext()
	sh.shrink()
}

// noteNext publishes the time of the root of the heap, for makeRoom and
// the sweeper to read without the lock. The caller holds sh.mu.
func (sh *shard) noteNext() {
	next := int64(math.MaxInt64)
	if len(sh.exp) > 0 {
		next = sh.exp[0].expires
	}
	if sh.next.Load() != next {
		sh.next.Store(next)
	}
}

// shrink rebuilds the map and the heap of sh once it holds a quarter of
// its peak or less, as Go maps never give memory back. The copy costs
// O(entries left), paid for by the three times as many removals since the
// peak. The caller holds sh.mu.
func (sh *shard) shrink() {
	if sh.peak < shrinkMin || len(sh.m) > sh.peak/4 {
		return
	}
	m := make(map[string]entry, len(sh.m))
	maps.Copy(m, sh.m)
	sh.m = m
	sh.exp = slices.Clone(sh.exp) // the nodes keep their positions
	sh.peak = len(m)
}
