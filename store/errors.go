package store

import "errors"

var (
	// ErrLeaseLost is returned by Complete and Extend when the token no
	// longer owns the key (the lease ran out, or another owner claimed the
	// key since), and by Release when another token owns the key or the
	// entry is completed. Release of a key that holds no entry succeeds.
	ErrLeaseLost = errors.New("store: lease lost")

	// ErrCorrupt is wrapped by errors for a stored value that cannot be
	// read: corrupt, written by something else, or from a future version.
	ErrCorrupt = errors.New("store: stored value unreadable")

	// ErrFull is returned by Claim when a bounded store has no room for a
	// new key. No existing entry is evicted to make room.
	ErrFull = errors.New("store: full")

	// ErrNotFound is wrapped by the error of [Inspector.Lookup] and
	// [Inspector.Purge] for a key that holds no live entry.
	ErrNotFound = errors.New("store: no entry under the key")

	// ErrInFlight is wrapped by the error of [Inspector.Purge] for an
	// in-flight entry that the purge did not ask for
	// ([PurgeOptions.InFlight]).
	ErrInFlight = errors.New("store: entry is in flight")

	// ErrChanged is wrapped by the error of [Inspector.Purge] for an entry
	// that is not the one the purge was fenced on: another claim's
	// ([PurgeOptions.Token]), or a completed entry where an in-flight one
	// was asked for.
	ErrChanged = errors.New("store: entry is not the one asked for")

	// ErrCursor is wrapped by the error of [Inspector.List] for a cursor
	// that the store did not make.
	ErrCursor = errors.New("store: invalid list cursor")
)
