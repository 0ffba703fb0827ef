package memorystore

import "time"

// DefaultSweepInterval is how often the background sweeper removes expired
// entries unless [WithSweepInterval] says otherwise.
const DefaultSweepInterval = time.Minute

// Option configures [New].
type Option func(*config)

type config struct {
	sweepInterval time.Duration
	maxEntries    int
}

func newConfig(opts []Option) config {
	c := config{sweepInterval: DefaultSweepInterval}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithSweepInterval sets how often the background sweeper walks the store
// to remove expired entries. Default [DefaultSweepInterval] (one minute).
// A value of zero or less turns the sweeper off: expired entries are then
// removed only when their key is touched again, or when a store bounded by
// [WithMaxEntries] is full.
func WithSweepInterval(d time.Duration) Option {
	return func(c *config) { c.sweepInterval = d }
}

// WithMaxEntries bounds the number of entries the store holds, in flight
// and completed, to n. Default: unbounded; a value of zero or less keeps it
// unbounded, and a value above [math.MaxInt32] is taken as math.MaxInt32.
// A Claim of a new key in a full store first drops expired entries, found
// through each shard's expiry heap at O(log n) each, whatever the number of
// entries; if none have expired it returns [store.ErrFull]. A claim that
// keeps losing the room it found to other claims is also refused after a
// few tries. No in-flight claim and no completed outcome is ever evicted
// early.
func WithMaxEntries(n int) Option {
	return func(c *config) { c.maxEntries = max(n, 0) }
}
