package store_test

import (
	"math"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

func TestUnits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d, unit time.Duration
		want    int64
	}{
		{1, time.Millisecond, 1},
		{time.Millisecond, time.Millisecond, 1},
		{time.Millisecond + 1, time.Millisecond, 2},
		{math.MaxInt64, time.Millisecond, math.MaxInt64/int64(time.Millisecond) + 1},
		{math.MaxInt64, time.Microsecond, math.MaxInt64/int64(time.Microsecond) + 1},
		{time.Duration(math.MaxInt64 - math.MaxInt64%int64(time.Millisecond)), time.Millisecond, math.MaxInt64 / int64(time.Millisecond)},
	}
	for _, tt := range tests {
		if got, ok := store.Units(tt.d, tt.unit); !ok || got != tt.want {
			t.Errorf("Units(%d, %v) = %d, %v; want %d", int64(tt.d), tt.unit, got, ok, tt.want)
		}
	}
	for _, d := range []time.Duration{0, -1, math.MinInt64} {
		if got, ok := store.Units(d, time.Millisecond); ok || got != 0 {
			t.Errorf("Units(%v) = %d, %v; want 0, false", d, got, ok)
		}
	}
}
