package memorystore

import "math"

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
	e.slot = sh.exp.push(key, e.expires)
	sh.m[key] = e
	sh.peak = max(sh.peak, len(sh.m))
	sh.noteNext()
}

// put stores e, which carries the slot of the entry under key, in place of
// that entry. The caller holds sh.mu.
func (sh *shard) put(key string, e entry) {
	sh.m[key] = e
	if i := sh.exp.pos(e.slot); e.expires < sh.exp.items[i].expires {
		sh.advance(i, e.expires)
	}
}

// advance moves the item at i up the heap to expires, earlier than its
// time. The caller holds sh.mu.
func (sh *shard) advance(i int, expires int64) {
	sh.exp.items[i].expires = expires
	sh.exp.up(i)
	sh.noteNext()
}

// remove deletes e, the entry under key; settle must follow. The caller
// holds sh.mu.
func (sh *shard) remove(key string, e entry) {
	sh.exp.removeAt(sh.exp.pos(e.slot))
	delete(sh.m, key)
	sh.untally(key, &e)
}

// untally takes e, the entry under key, away from the shard's counts. The
// caller holds sh.mu.
func (sh *shard) untally(key string, e *entry) {
	sh.live[e.state-1].add(-1, -entrySize(key, e))
}

// add counts n more entries of bytes more bytes (or fewer, when
// negative).
func (t *tally) add(n, bytes int64) {
	t.n += n
	t.bytes += bytes
}

// entrySize is the size of an entry as Info.Size counts it: its key,
// fingerprint and data.
func entrySize(key string, e *entry) int64 {
	return int64(len(key) + len(e.fingerprint) + len(e.data))
}

// popExpired deletes the entries that expired by now, earliest first, and
// returns how many it deleted. An item whose time came but whose entry
// expires later is moved to that expiry instead. It visits at most limit
// items, and reports whether it stopped for that reason. settle must
// follow. The caller holds sh.mu.
func (sh *shard) popExpired(now int64, limit int) (deleted int, more bool) {
	h := &sh.exp
	for visited := 0; len(h.items) > 0 && h.items[0].expires <= now; visited++ {
		if visited == limit {
			return deleted, true
		}
		key := h.slots[h.items[0].slot].key
		e := sh.m[key]
		if e.expires > now {
			h.items[0].expires = e.expires
			h.down(0)
			continue
		}
		h.removeAt(0)
		delete(sh.m, key)
		sh.untally(key, &e)
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
	if len(sh.exp.items) > 0 {
		next = sh.exp.items[0].expires
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
	n := len(sh.exp.items)
	m := make(map[string]entry, n)
	h := expiryHeap{items: make([]item, n), slots: make([]slot, n)}
	for i, it := range sh.exp.items { // item i gets slot i
		key := sh.exp.slots[it.slot].key
		e := sh.m[key]
		e.slot = int32(i)
		m[key] = e
		h.items[i] = item{it.expires, int32(i)}
		h.slots[i] = slot{key, int32(i)}
	}
	sh.m, sh.exp, sh.peak = m, h, n
	sh.gen++
}
