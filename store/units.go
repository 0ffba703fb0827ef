package store

import "time"

// Units returns d in whole multiples of unit, rounded up, for a Store whose
// backend takes leases and retentions in whole units (time.Millisecond for
// Redis PX and PEXPIRE, time.Microsecond for a PostgreSQL interval): a
// duration under one unit gives 1, never 0, which a backend may read as
// "no expiry" or "expire now". It never overflows: every positive
// time.Duration, up to math.MaxInt64 (about 292 years), gives a positive
// count. ok is false when d is not positive, which a Store answers with
// an argument error, changing nothing (see the package documentation).
// unit must be positive.
func Units(d, unit time.Duration) (n int64, ok bool) {
	if d <= 0 {
		return 0, false
	}
	n = int64(d / unit)
	if d%unit != 0 {
		n++
	}
	return n, true
}
