package memorystore

// expiryHeap is a min-heap of the expiries of a shard's entries, one item
// per entry, so finding the expired entries costs O(expired · log n)
// instead of a walk over every entry.
//
// It is a 4-ary heap, the structure the Go runtime keeps its timers in,
// rather than container/heap's binary one: half the depth, the children of
// an item side by side in memory, and an item moved into the hole it goes
// to instead of swapped at every level, so a shard of thousands of entries
// touches a few cache lines per update.
//
// Each entry has a slot, which holds its key and the position of its item;
// the entry keeps the slot's number, and each move of an item updates its
// slot. Slots live in one slice per shard, reused through a free list, so
// the heap makes no allocation per entry and its items hold no pointers
// for the garbage collector to follow.
type expiryHeap struct {
	items []item
	slots []slot
	free  []int32 // slots not in use
}

// item is one element of an expiryHeap.
type item struct {
	expires int64 // a copy of the entry's, so sifting reads no entry
	slot    int32
}

// slot ties an entry to its item.
type slot struct {
	key string
	pos int32 // of the item in items
}

// heapArity is the number of children of an item.
const heapArity = 4

// push adds an item for key at expires and returns its slot.
func (h *expiryHeap) push(key string, expires int64) int32 {
	var s int32
	if n := len(h.free); n > 0 {
		s, h.free = h.free[n-1], h.free[:n-1]
		h.slots[s].key = key
	} else {
		s = int32(len(h.slots))
		h.slots = append(h.slots, slot{key: key})
	}
	h.items = append(h.items, item{expires, s})
	h.up(len(h.items) - 1)
	return s
}

// pos returns the position of the item of slot s.
func (h *expiryHeap) pos(s int32) int { return int(h.slots[s].pos) }

// removeAt removes the item at i, frees its slot, and returns its key.
func (h *expiryHeap) removeAt(i int) string {
	s, last := h.items[i].slot, len(h.items)-1
	if i != last {
		h.set(i, h.items[last])
	}
	h.items = h.items[:last]
	if i != last {
		h.fix(i)
	}
	key := h.slots[s].key
	h.slots[s] = slot{} // let the key go
	h.free = append(h.free, s)
	return key
}

// set puts it at i and tells its slot.
func (h *expiryHeap) set(i int, it item) {
	h.items[i] = it
	h.slots[it.slot].pos = int32(i)
}

// fix restores the heap after the time of the item at i changed.
func (h *expiryHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// up moves the item at i towards the root while it comes before its
// parent.
func (h *expiryHeap) up(i int) {
	it := h.items[i]
	for i > 0 {
		p := (i - 1) / heapArity
		if h.items[p].expires <= it.expires {
			break
		}
		h.set(i, h.items[p])
		i = p
	}
	h.set(i, it)
}

// down moves the item at i towards the leaves while a child comes before
// it, and reports whether it moved.
func (h *expiryHeap) down(i int) bool {
	items := h.items
	it, from := items[i], i
	for {
		first := heapArity*i + 1
		if first >= len(items) {
			break
		}
		m := first // the child that comes first
		for c := first + 1; c < min(first+heapArity, len(items)); c++ {
			if items[c].expires < items[m].expires {
				m = c
			}
		}
		if items[m].expires >= it.expires {
			break
		}
		h.set(i, items[m])
		i = m
	}
	h.set(i, it)
	return i != from
}
