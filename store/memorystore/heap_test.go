package memorystore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// checkHeap fails t unless h is a heap whose nodes know their positions.
func checkHeap(t *testing.T, h expiryHeap) {
	t.Helper()
	for i, it := range h {
		if it.n.pos != i {
			t.Fatalf("item %d: node says pos %d", i, it.n.pos)
		}
		if p := (i - 1) / heapArity; i > 0 && h[p].expires > it.expires {
			t.Fatalf("item %d expires at %d, before its parent %d at %d", i, it.expires, p, h[p].expires)
		}
	}
}

func TestExpiryHeapRandomOps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		seed   uint64
		spread int64 // expiries are drawn from [0, spread)
	}{
		{"Distinct", 1, 1 << 40},
		{"ManyTies", 2, 8},
		{"Small", 3, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(tc.seed, 0))
			var h expiryHeap
			for step := range 20000 {
				switch op := r.IntN(10); {
				case op < 5 || len(h) == 0:
					h.push(item{r.Int64N(tc.spread), &node{key: fmt.Sprint(step)}})
				case op < 7:
					i := r.IntN(len(h))
					h[i].expires = r.Int64N(tc.spread)
					h.fix(i)
				case op < 9:
					i := r.IntN(len(h))
					want := h[i].n
					if got := h.removeAt(i); got != want {
						t.Fatalf("removeAt(%d) returned another node", i)
					}
				default:
					min := h[0].expires
					for _, it := range h {
						if it.expires < min {
							t.Fatalf("the root expires at %d, after an item at %d", min, it.expires)
						}
					}
					h.removeAt(0)
				}
				if step%97 == 0 {
					checkHeap(t, h)
				}
			}
			checkHeap(t, h)
			for last := int64(-1); len(h) > 0; {
				it := h[0]
				h.removeAt(0)
				if it.expires < last {
					t.Fatalf("popped %d after %d", it.expires, last)
				}
				last = it.expires
			}
		})
	}
}

// checkShards fails t unless every shard's map and heap describe the same
// entries, and the count of a bounded store matches them. It holds every
// shard's lock, as every change to the count is made under one.
func checkShards(t *testing.T, st *state) {
	t.Helper()
	for i := range st.shards {
		st.shards[i].mu.Lock()
		defer st.shards[i].mu.Unlock()
	}
	total := 0
	for i := range st.shards {
		sh := &st.shards[i]
		checkHeap(t, sh.exp)
		if len(sh.exp) != len(sh.m) {
			t.Fatalf("shard %d: %d heap items for %d entries", i, len(sh.exp), len(sh.m))
		}
		for _, it := range sh.exp {
			e, ok := sh.m[it.n.key]
			if !ok || e.n != it.n || it.expires > e.expires {
				t.Fatalf("shard %d: heap item for %q (at %d) does not match its entry %+v", i, it.n.key, it.expires, e)
			}
		}
		if next := sh.next.Load(); next != root(sh.exp) {
			t.Fatalf("shard %d: next %d, heap root %d", i, next, root(sh.exp))
		}
		total += len(sh.m)
	}
	if count := st.room.Load() & countMask; st.bounded() && count != uint64(total) {
		t.Fatalf("count %d, entries %d", count, total)
	}
}

// root returns the time of the root of h, math.MaxInt64 when it is empty.
func root(h expiryHeap) int64 {
	if len(h) == 0 {
		return math.MaxInt64
	}
	return h[0].expires
}

// Random operations through the Store keep every shard's map, heap and
// count in step.
func TestShardsStayConsistent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"Unbounded", nil},
		{"Bounded", []Option{WithMaxEntries(300), WithSweepInterval(0)}},
		{"BoundedSweeping", []Option{WithMaxEntries(300), WithSweepInterval(time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(tc.opts...)
			defer s.Close()
			ctx := t.Context()
			r := rand.New(rand.NewPCG(7, 0))
			toks := map[string]string{}
			durations := []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Hour}
			for step := range 30000 {
				key := fmt.Sprint("k", r.IntN(1000))
				d := durations[r.IntN(len(durations))]
				switch r.IntN(4) {
				case 0:
					if c, err := s.Claim(ctx, key, nil, d); err == nil && c.Won() {
						toks[key] = c.Token
					}
				case 1:
					_ = s.Complete(ctx, key, toks[key], nil, d)
				case 2:
					_ = s.Extend(ctx, key, toks[key], d)
				default:
					_ = s.Release(ctx, key, toks[key])
				}
				if step%1000 == 0 {
					checkShards(t, s.st)
				}
			}
			checkShards(t, s.st)
		})
	}
}
