package memorystore

import (
	"fmt"
	"math"
	"testing"
)

// The count of a bounded store has 32 bits: a larger bound is taken as the
// largest it can hold, and the count never spills into the version.
func TestRoomBoundFitsTheCount(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1 << 20, math.MaxInt32, math.MaxInt32 + 1, math.MaxInt} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			s := New(WithMaxEntries(n), WithSweepInterval(0))
			defer s.Close()
			st := s.st
			want := uint64(min(n, math.MaxInt32))
			if st.maxEntries != want {
				t.Fatalf("maxEntries = %d, want %d", st.maxEntries, want)
			}
			st.room.Store(want - 1) // one room left
			if !st.reserve() {
				t.Fatal("reserve refused the last room")
			}
			if st.reserve() {
				t.Fatal("reserve went over the bound")
			}
			if v := st.room.Load(); v&countMask != want || v>>32 != 1 {
				t.Fatalf("room word %#x: want count %d and one change", v, want)
			}
		})
	}
}
