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
)
