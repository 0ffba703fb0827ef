package memorystore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// checkHeap fails t unless h is a heap whose slots know their items, and
// returns the keys of its items.
func checkHeap(t *testing.T, h *expiryHeap) []string {
	t.Helper()
	keys := make([]string, len(h.items))
	for i, it := range h.items {
		if pos := h.pos(it.slot); pos != i {
			t.Fatalf("item %d: slot %d says pos %d", i, it.slot, pos)
		}
		if p := (i - 1) / heapArity; i > 0 && h.items[p].expires > it.expires {
			t.Fatalf("item %d at %d comes before its parent %d at %d", i, it.expires, p, h.items[p].expires)
		}
		keys[i] = h.slots[it.slot].key
	}
	if n := len(h.items) + len(h.free); n != len(h.slots) {
		t.Fatalf("%d items and %d free slots, for %d slots", len(h.items), len(h.free), len(h.slots))
	}
	for _, s := range h.free {
		if h.slots[s].key != "" {
			t.Fatalf("free slot %d still holds key %q", s, h.slots[s].key)
		}
	}
	return keys
}

func TestExpiryHeapRandomOps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		seed   uint64
		spread int64 // times are drawn from [0, spread)
	}{
		{"Distinct", 1, 1 << 40},
		{"ManyTies", 2, 8},
		{"Small", 3, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(tc.seed, 0))
			var h expiryHeap
			slotOf := map[string]int32{} // what push returned
			for step := range 20000 {
				switch op := r.IntN(10); {
				case op < 5 || len(h.items) == 0:
					key := fmt.Sprint(step)
					slotOf[key] = h.push(key, r.Int64N(tc.spread))
				case op < 7:
					i := r.IntN(len(h.items))
					h.items[i].expires = r.Int64N(tc.spread)
					h.fix(i)
				case op < 9:
					i := r.IntN(len(h.items))
					want := h.slots[h.items[i].slot].key
					if got := h.removeAt(i); got != want {
						t.Fatalf("removeAt(%d) = %q, want %q", i, got, want)
					}
					delete(slotOf, want)
				default:
					first := h.items[0].expires
					for _, it := range h.items {
						if it.expires < first {
							t.Fatalf("the root is at %d, after an item at %d", first, it.expires)
						}
					}
					delete(slotOf, h.removeAt(0))
				}
				if step%97 == 0 {
					for _, key := range checkHeap(t, &h) {
						if s := slotOf[key]; h.slots[s].key != key {
							t.Fatalf("the slot push gave %q (%d) holds %q", key, s, h.slots[s].key)
						}
					}
				}
			}
			checkHeap(t, &h)
			for last := int64(-1); len(h.items) > 0; {
				it := h.items[0]
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
		keys := checkHeap(t, &sh.exp)
		if len(keys) != len(sh.m) {
			t.Fatalf("shard %d: %d heap items for %d entries", i, len(keys), len(sh.m))
		}
		for j, key := range keys {
			e, ok := sh.m[key]
			if it := sh.exp.items[j]; !ok || e.slot != it.slot || it.expires > e.expires {
				t.Fatalf("shard %d: heap item %+v for %q does not match its entry %+v", i, it, key, e)
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
	if len(h.items) == 0 {
		return math.MaxInt64
	}
	return h.items[0].expires
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
					if c, err := s.Claim(ctx, key, nil, d, store.ClaimOptions{}); err == nil && c.Won() {
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

// A shard that shrinks renumbers its slots; its entries keep working.
func TestShrinkKeepsShardsConsistent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"Unbounded", nil},
		{"Bounded", []Option{WithMaxEntries(100_000)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(tc.opts...)
			defer s.Close()
			ctx := t.Context()
			const n = 40_000 // over shrinkMin entries per shard
			toks := make([]string, n)
			for i := range toks {
				c, err := s.Claim(ctx, fmt.Sprint("k", i), nil, time.Hour, store.ClaimOptions{})
				if err != nil || !c.Won() {
					t.Fatalf("Claim k%d: won=%v err=%v", i, c.Won(), err)
				}
				toks[i] = c.Token
			}
			for i := range toks {
				if i%10 != 0 { // keep one in ten
					if err := s.Release(ctx, fmt.Sprint("k", i), toks[i]); err != nil {
						t.Fatal(err)
					}
				}
			}
			checkShards(t, s.st)
			shrunk := 0
			for i := range s.st.shards {
				if s.st.shards[i].peak < n/numShards/2 {
					shrunk++
				}
			}
			if shrunk == 0 {
				t.Fatal("no shard rebuilt its map after losing nine entries in ten")
			}
			for i := 0; i < n; i += 10 {
				if err := s.Complete(ctx, fmt.Sprint("k", i), toks[i], []byte("x"), time.Nanosecond); err != nil {
					t.Fatalf("Complete k%d after the shrink: %v", i, err)
				}
			}
			time.Sleep(time.Millisecond)
			s.st.sweep()
			checkShards(t, s.st)
			if l := s.Len(); l != 0 {
				t.Fatalf("Len = %d after every entry expired and a sweep, want 0", l)
			}
		})
	}
}
