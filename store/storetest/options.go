package storetest

import "time"

// Default durations of the suite.
const (
	// DefaultLease is the short lease the expiry cases claim with.
	DefaultLease = 250 * time.Millisecond
	// DefaultRetention is the short retention the expiry cases complete
	// with.
	DefaultRetention = 250 * time.Millisecond
)

// longTTL is the lease and retention of every case that is not about
// expiry: long enough that nothing expires while the suite runs.
const longTTL = time.Minute

// Option configures [Run].
type Option func(*config)

type config struct {
	lease     time.Duration
	retention time.Duration
	// notInspectable waives the Inspect cases for a store that does not
	// implement store.Inspector.
	notInspectable bool
}

func newConfig(opts []Option) config {
	c := config{lease: DefaultLease, retention: DefaultRetention}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithLease sets the short lease that the expiry cases claim with and then
// sleep past. Default [DefaultLease] (250ms). Raise it for a store whose
// expiry is coarse or whose round trips are slow; a value of zero or less
// keeps the default.
func WithLease(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.lease = d
		}
	}
}

// WithRetention sets the short retention that the expiry cases complete
// with and then sleep past. Default [DefaultRetention] (250ms); a value of
// zero or less keeps the default.
func WithRetention(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.retention = d
		}
	}
}

// WithoutInspection is for a store that does not implement
// [store.Inspector], the one exception to the rule that every store does:
// the Inspect and Invalidate cases are then skipped instead of failing.
// Without it, [Run] fails every Inspect case of such a store, so that a
// new store cannot leave inspection out by accident. A store that does
// implement store.Inspector runs the cases all the same.
func WithoutInspection() Option {
	return func(c *config) { c.notInspectable = true }
}
