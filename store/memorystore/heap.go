package memorystore

// node is an entry's place in its shard's expiry heap: the entry points to
// it, and the heap keeps pos up to date as it moves the node.
type node struct {
	key string
	pos int
}

// item is one element of an expiryHeap.
type item struct {
	expires int64 // a copy of the entry's, so sifting reads no entry
	n       *node
}

// expiryHeap is a min-heap of the expiries of a shard's entries, one item
// per entry, so finding the expired entries costs O(expired · log n)
// instead of a walk over every entry.
//
// It is a 4-ary heap, the structure the Go runtime keeps its timers in,
// rather than container/heap's binary one: half the depth, the children of
// an item side by side in memory, and an item moved into the hole it goes
// to instead of swapped at every level, so a shard of thousands of entries
// touches a few cache lines per update. Each move updates the node's pos.
type expiryHeap []item

// heapArity is the number of children of an item.
const heapArity = 4

// push adds it.
func (h *expiryHeap) push(it item) {
	*h = append(*h, it)
	h.up(len(*h) - 1)
}

// removeAt removes the item at i and returns its node.
func (h *expiryHeap) removeAt(i int) *node {
	old := *h
	n, last := old[i].n, len(old)-1
	if i != last {
		old[i] = old[last]
		old[i].n.pos = i
	}
	old[last] = item{} // let the node go
	*h = old[:last]
	if i != last {
		h.fix(i)
	}
	return n
}

// fix restores the heap after the expiry of the item at i changed.
func (h expiryHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

// up moves the item at i towards the root while it expires before its
// parent.
func (h expiryHeap) up(i int) {
	it := h[i]
	for i > 0 {
		p := (i - 1) / heapArity
		if h[p].expires <= it.expires {
			break
		}
		h[i] = h[p]
		h[i].n.pos = i
		i = p
	}
	h[i] = it
	it.n.pos = i
}

// down moves the item at i towards the leaves while a child expires before
// it, and reports whether it moved.
func (h expiryHeap) down(i int) bool {
	it, from := h[i], i
	for {
		first := heapArity*i + 1
		if first >= len(h) {
			break
		}
		m := first // the child that expires first
		for c := first + 1; c < min(first+heapArity, len(h)); c++ {
			if h[c].expires < h[m].expires {
				m = c
			}
		}
		if h[m].expires >= it.expires {
			break
		}
		h[i] = h[m]
		h[i].n.pos = i
		i = m
	}
	h[i] = it
	it.n.pos = i
	return i != from
}
