// Package ttl converts the leases and retentions the networked stores are
// given to the whole units their backends take.
package ttl

import (
	"fmt"
	"time"
)

// Units returns d in whole units (time.Millisecond for Redis PX and
// PEXPIRE, time.Microsecond for a PostgreSQL interval), rounded up so that
// a TTL under one unit does not become 0. It never overflows: every
// positive time.Duration, up to math.MaxInt64 (about 292 years), gives a
// positive count, which both backends can add to their clock. It returns
// an error naming what (the store and the argument, as in "redisstore:
// lease") for a d that is not positive.
func Units(what string, d, unit time.Duration) (int64, error) {
	if d <= 0 {
		return 0, fmt.Errorf("%s must be positive, got %v", what, d)
	}
	n := int64(d / unit)
	if d%unit != 0 {
		n++
	}
	return n, nil
}
