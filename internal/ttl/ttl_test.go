package ttl

import (
	"math"
	"strings"
	"testing"
	"time"
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
		got, err := Units("x", tt.d, tt.unit)
		if err != nil || got != tt.want {
			t.Errorf("Units(%d, %v) = %d, %v; want %d", int64(tt.d), tt.unit, got, err, tt.want)
		}
	}
	for _, d := range []time.Duration{0, -1, math.MinInt64} {
		if _, err := Units("redisstore: lease", d, time.Millisecond); err == nil || !strings.HasPrefix(err.Error(), "redisstore: lease must be positive") {
			t.Errorf("Units(%v) error = %v, want one naming the lease", d, err)
		}
	}
}
