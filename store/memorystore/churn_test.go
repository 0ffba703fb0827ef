package memorystore_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// liveHeap returns the bytes of live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMapsShrinkAfterChurn fills a store, empties it again, and checks that
// the memory the entries took is given back: Go maps never shrink on their
// own, so a store that only deletes would keep its peak size for ever.
//
// Not parallel: it measures the heap of the whole process, so no other test
// may allocate meanwhile.
func TestMapsShrinkAfterChurn(t *testing.T) {
	const n = 100_000
	for _, tc := range []struct {
		name string
		opts []memorystore.Option
		// empty removes every entry, one way or another.
		empty func(t *testing.T, s *memorystore.Store, toks []string)
	}{
		{"Release", nil, func(t *testing.T, s *memorystore.Store, toks []string) {
			for i, tok := range toks {
				if err := s.Release(t.Context(), fmt.Sprint("k", i), tok); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"Sweeper", []memorystore.Option{memorystore.WithSweepInterval(5 * time.Millisecond)},
			func(t *testing.T, s *memorystore.Store, toks []string) {
				expireAll(t, s, toks)
				eventually(t, func() bool { return s.Len() == 0 }, "the sweeper removed every expired entry")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := liveHeap()
			s := newStore(t, tc.opts...)
			toks := make([]string, n)
			for i := range toks {
				c, err := s.Claim(t.Context(), fmt.Sprint("k", i), nil, time.Hour, store.ClaimOptions{})
				if err != nil || !c.Won() {
					t.Fatalf("Claim k%d: won=%v err=%v", i, c.Won(), err)
				}
				toks[i] = c.Token
			}
			peak := liveHeap()
			tc.empty(t, s, toks)
			toks = nil //nolint:ineffassign,wastedassign // drops the tokens before the heap is measured: only the store's own memory counts
			after := liveHeap()
			runtime.KeepAlive(s)
			grown, kept := int64(peak)-int64(base), int64(after)-int64(base)
			t.Logf("heap: %d bytes at the peak of %d entries, %d kept with %d entries left", grown, n, kept, s.Len())
			if kept > grown/4 {
				t.Fatalf("the store keeps %d of the %d bytes its %d entries took once emptied (Len %d): its maps kept their peak size",
					kept, grown, n, s.Len())
			}
		})
	}
}

// expireAll makes every claim of toks expire at once.
func expireAll(t *testing.T, s *memorystore.Store, toks []string) {
	t.Helper()
	for i, tok := range toks {
		if err := s.Extend(t.Context(), fmt.Sprint("k", i), tok, time.Nanosecond); err != nil {
			t.Fatal(err)
		}
	}
}
