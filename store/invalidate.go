package store

import "context"

// Invalidator is implemented by a Store that tells its subscribers, on
// every instance over the same backend, which keys were purged
// ([Inspector.Purge]), so that a cache of completed outcomes in front of
// the store (the replay cache of the idempotency server) stops replaying a
// purged key at once rather than when its entry expires. The memory store
// tells the subscribers of its own process; the Redis store publishes on a
// Redis channel; the PostgreSQL store sends a NOTIFY; the MySQL and SQLite
// stores write a purge log in the purge's transaction, which each
// subscription polls (within an interval, a second by default).
//
// Delivery is at most once: a subscriber that is disconnected misses the
// purges made meanwhile. A store that knows it may have missed some (a
// subscription that was interrupted, a receiver that fell behind) sends
// an [Invalidation] with All set once it is back, and the subscriber then
// drops everything it holds; what it cannot know about (a network that
// delays a message) is bounded only by the subscriber's own expiry.
type Invalidator interface {
	// Invalidations subscribes to the purges of the store and returns the
	// channel they arrive on, from the time it returns (a purge made after
	// Invalidations returned is delivered, a purge made before it is not)
	// until ctx is done, when the store stops delivering and closes the
	// channel. It returns an error, and no channel, when the subscription
	// cannot be made. Each call is a subscription of its own, which may
	// hold a connection of its own for its lifetime. The receiver must
	// keep reading: a store may hold back its deliveries, or drop them and
	// send All, while the receiver falls behind.
	Invalidations(ctx context.Context) (<-chan Invalidation, error)
}

// Invalidation is one message of an [Invalidator]. One with neither Key
// nor All names nothing, and a replay cache ignores it.
type Invalidation struct {
	// Key is the store key that was purged; empty when All is set.
	Key string
	// All means that purges may have been missed: drop every key.
	All bool
}
