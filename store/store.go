// Package store defines the contract between the idempotency interceptor and
// the storage that keeps claims and outcomes.
//
// A Store keeps one entry per key. An entry is either in flight (a handler
// holds it under an owner token until its lease runs out) or completed (it
// holds the encoded outcome until its retention runs out). Every method is a
// single atomic step, and one round trip on a networked store: no method
// reads and then writes in two steps.
//
// The interceptor hashes keys and encodes outcomes before they reach a Store,
// so a Store treats keys, fingerprints and data as opaque bytes.
//
// The interceptor calls Complete, Release and Extend with a context
// detached from the caller's cancellation, bounded by a deadline of its
// own (the store timeout, and at most a third of the lease per attempt),
// so implementations honour the context's deadline.
//
// Leases and retentions are positive; a Store returns an argument error for
// a zero or negative one and changes nothing. Every positive duration, up
// to math.MaxInt64 (about 292 years), is valid and means what it says: a
// Store that cannot represent one keeps the entry as long as it can
// (saturates), and never expires it early or refuses it. A networked store may spend
// one extra round trip the first time a server sees an operation (loading a
// script); that is the only exception to one round trip per operation.
//
// # Inspection and invalidation
//
// Beside Store, a store implements [Inspector], which looks up, lists,
// purges and counts its entries for an operator (every store of this
// repository does, and the conformance suite checks it), and may implement
// [Invalidator], which tells every server's cache in front of the store
// which keys were purged. Neither is on the request path.
//
// # Helpers for implementations
//
// [NewToken] makes owner tokens that carry their claim time, which
// [TokenTime] reads back; [Units] converts a lease or a retention to the
// whole units a backend takes. Like the rest of this package they import
// nothing but the standard library, so that stores in modules of their
// own share them without depending on the idempotency module's internals.
//
// Implementations live in [github.com/grpc-idempotency/idempotency/store/memorystore],
// [github.com/grpc-idempotency/idempotency/store/redisstore],
// [github.com/grpc-idempotency/idempotency/store/postgresstore],
// [github.com/grpc-idempotency/idempotency/store/mysqlstore] and
// [github.com/grpc-idempotency/idempotency/store/sqlitestore], and
// [github.com/grpc-idempotency/idempotency/store/migratestore] moves a
// service from one to another; each passes the conformance suite in
// [github.com/grpc-idempotency/idempotency/store/storetest].
package store

import (
	"context"
	"time"
)

// Store keeps idempotency claims and outcomes. Implementations are safe for
// concurrent use.
type Store interface {
	// Claim atomically claims key for a caller whose request has the given
	// fingerprint. If no live entry exists under key, Claim creates an
	// in-flight entry whose lease runs out after lease and returns a
	// ClaimResult whose Token is a fresh owner token and whose Attempt is
	// 1. Otherwise it changes nothing and returns a ClaimResult with an
	// empty Token and the existing Entry (in flight, abandoned or
	// completed, with the fingerprint it was claimed with), except for the
	// take-over below. An entry whose lease (without opts.Keep) or
	// retention has run out does not exist.
	//
	// With opts.Keep, the entry outlives its lease by Keep: once the lease
	// runs out (the handler's server died, or hung past its lease) the
	// entry is abandoned ([StateAbandoned]) until Keep has passed too, and
	// a Claim finds it so. With opts.TakeOver, a Claim that finds an
	// abandoned entry with the same fingerprint takes it over in the same
	// atomic step: the entry is in flight again under a fresh owner token
	// (so the token that abandoned it can neither complete, release nor
	// extend it), and the ClaimResult says which attempt this is (the
	// abandoned one's plus 1) and when the abandoned attempt was claimed
	// (Previous). An abandoned entry with another fingerprint is returned,
	// not taken over. An entry keeps the Keep of the Claim that made it
	// (Extend and a take-over keep it too) and its attempt count; the
	// store keeps them as it likes, in the entry or beside it.
	//
	// Claim returns an error wrapping [ErrCorrupt] when the value under
	// key cannot be read, and [ErrFull] when a bounded store has no room for a
	// new entry (a memory store at its bound, a Redis at maxmemory). A full
	// store still answers a Claim of a key that holds an entry, and still
	// lets the steps of a claim it granted (Complete, Release, Extend) go
	// through: refusing them would leave a handler that ran without its
	// stored outcome.
	// Fingerprint and Data of the returned Entry are read-only: they may be
	// shared with the store.
	Claim(ctx context.Context, key string, fingerprint []byte, lease time.Duration, opts ClaimOptions) (ClaimResult, error)

	// Complete stores data as the outcome for key and keeps it for
	// retention, but only while token still owns the in-flight entry.
	// Complete repeated with the token that completed the entry returns nil
	// and changes nothing, so a Complete retried after its reply was lost
	// reports success. An abandoned entry that token still owns (nobody
	// took it over) is completed too: the outcome of a handler that
	// outlived its lease is worth keeping, and an operator resolves an
	// abandoned entry this way ([Info.Token]). Otherwise it changes
	// nothing and returns [ErrLeaseLost] (which may also match [ErrCorrupt] when the value under
	// key is not the store's). The store keeps its own copy of data.
	Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error

	// Release deletes the in-flight entry for key, but only while token
	// still owns it. When key holds no entry, there is nothing left to
	// release and Release returns nil: the lease ran out and nobody claimed
	// the key since, or this is a Release resent by a client after the
	// first send had landed (whose reply was lost). When key holds an entry
	// that token does not own (another owner's claim, or a completed entry,
	// whatever token completed it), Release changes nothing and returns
	// [ErrLeaseLost]: it never removes another owner's entry or a completed
	// one. An abandoned entry that token still owns is released like an
	// in-flight one.
	Release(ctx context.Context, key, token string) error

	// Extend resets the lease of the in-flight entry for key to lease from
	// now, but only while token still owns it and its lease has not run
	// out: an abandoned entry stays abandoned (a duplicate may already have
	// been told so). Otherwise it changes nothing and returns
	// [ErrLeaseLost]. An entry claimed with [ClaimOptions.Keep] keeps Keep
	// beyond the new lease.
	Extend(ctx context.Context, key, token string, lease time.Duration) error

	// Abandon ends the lease of the in-flight entry for key now, while
	// token owns it, so that it is abandoned at once rather than when its
	// lease runs out: the engine calls it when a recovery could not tell
	// what an abandoned attempt did. An entry claimed without Keep has no
	// life beyond its lease and is deleted. Abandon of an entry that token
	// owns and that is already abandoned returns nil and changes nothing.
	// Otherwise it changes nothing and returns [ErrLeaseLost].
	Abandon(ctx context.Context, key, token string) error
}

// ClaimOptions are the options of one [Store.Claim].
type ClaimOptions struct {
	// Keep, when positive, keeps a new entry for Keep beyond the end of
	// its lease, as abandoned, rather than deleting it when its lease runs
	// out (the method's retention, as a rule). Zero keeps nothing: the
	// entry is gone when its lease runs out. Negative is an argument
	// error.
	Keep time.Duration
	// TakeOver takes over an abandoned entry with the same fingerprint
	// (see [Store.Claim]).
	TakeOver bool
}

// ClaimResult is the result of [Store.Claim]: a won claim's owner token,
// or the entry that was already under the key.
type ClaimResult struct {
	// Token is the owner token of a new claim; empty when the key was
	// already taken, in which case Existing describes the entry.
	Token string
	// Attempt counts the claims of the key that ran a handler, this one
	// included: 1 for a claim of a free key, the abandoned attempt's
	// plus 1 for a take-over; 0 when Token is empty.
	Attempt int
	// Previous is when the abandoned attempt that a take-over replaced was
	// claimed, by the clock of the server that claimed it; the zero Time
	// for a claim of a free key, and when the store does not know.
	Previous time.Time
	// Existing is the entry already under the key when Token is empty, and
	// the zero Entry otherwise.
	Existing Entry
}

// Won reports whether the caller now owns the key.
func (c ClaimResult) Won() bool { return c.Token != "" }

// State is the lifecycle state of an entry.
type State uint8

const (
	// StateInFlight means a handler holds the key under an owner token.
	StateInFlight State = iota + 1
	// StateCompleted means the outcome is stored.
	StateCompleted
	// StateAbandoned means the lease of an in-flight entry kept with
	// [ClaimOptions.Keep] ran out before its owner completed or released
	// it: its handler may have run, in part or in full, and nobody knows
	// its outcome.
	StateAbandoned
)

// String returns "in_flight", "completed", "abandoned" or "unknown".
func (s State) String() string {
	switch s {
	case StateInFlight:
		return "in_flight"
	case StateCompleted:
		return "completed"
	case StateAbandoned:
		return "abandoned"
	default:
		return "unknown"
	}
}

// Entry is what a Store keeps under a key.
type Entry struct {
	// State is StateInFlight, StateAbandoned or StateCompleted.
	State State
	// Fingerprint is the fingerprint the key was claimed with.
	Fingerprint []byte
	// Data is the outcome passed to Complete; nil unless completed.
	Data []byte
}
