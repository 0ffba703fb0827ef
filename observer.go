package idempotency

import (
	"context"
	"time"
)

// Observer is told of every decision the server interceptor makes. Observe
// runs on the request path and must not block.
//
// A failed store call is one [OutcomeStoreError] event per attempt: storing
// an outcome or releasing a claim is retried through transient errors for
// up to the store timeout, and a lease renewal is retried until the lease
// ends, so one call may report several, numbered by [Event.Attempt]. Count
// the events whose Attempt is 1 to count failing store steps rather than
// attempts.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to [Observer].
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

type nopObserver struct{}

func (nopObserver) Observe(context.Context, Event) {}

// Event describes one decision.
type Event struct {
	// Method is the full method name, or the operation of [Do] and [Once].
	Method string
	// Outcome is what happened.
	Outcome Outcome
	// StoreTime is the time spent in store calls for this decision. For
	// an [OutcomeStoreError] it is the time of the one failed attempt, so
	// that a step retried several times counts each attempt's time once.
	StoreTime time.Duration
	// Err is the store or handler error behind the outcome, if any.
	Err error
	// Attempt numbers the failed attempt of an [OutcomeStoreError]: 1 for a
	// store step's first try, 2 for its first retry, and so on (a claim or
	// a lookup is tried once; storing an outcome, releasing a claim and
	// renewing a lease are retried). It is 0 for every other outcome.
	Attempt int
}

// Outcome is the kind of an [Event].
type Outcome int

// Outcomes.
const (
	// OutcomeExecuted: the handler ran under a claim and its outcome was
	// stored.
	OutcomeExecuted Outcome = iota + 1
	// OutcomeReplayed: a stored outcome was replayed; the handler did not run.
	OutcomeReplayed
	// OutcomeInFlight: the key was in flight; the call was rejected with
	// ABORTED.
	OutcomeInFlight
	// OutcomeKeyReused: the key was used with a different request.
	OutcomeKeyReused
	// OutcomeKeyMissing: a MODE_REQUIRED method was called without a key.
	OutcomeKeyMissing
	// OutcomeKeyInvalid: the key was malformed.
	OutcomeKeyInvalid
	// OutcomeStoreError: one attempt of a store call failed. A claim or
	// lookup that fails ends the call closed; a failed attempt to store
	// the outcome, release the claim or renew the lease is retried, each
	// attempt reported with its number in [Event.Attempt] and its own
	// StoreTime.
	OutcomeStoreError
	// OutcomeFailOpen: the store failed; the handler ran without
	// deduplication ([WithFailOpen]).
	OutcomeFailOpen
	// OutcomeReleased: the handler failed with a retryable error or panicked;
	// the claim was released so a retry runs it again.
	OutcomeReleased
	// OutcomeLeaseRenewed: a running handler's lease was renewed.
	OutcomeLeaseRenewed
	// OutcomeLeaseLost: a running handler lost its claim; its outcome was
	// returned but not stored.
	OutcomeLeaseLost
	// OutcomeRecordCorrupt: the stored record could not be read.
	OutcomeRecordCorrupt
	// OutcomeNotRetained: the outcome could not be kept (over the size
	// limit, not a proto message, or not encodable); the key was completed
	// with a record that refuses replays.
	OutcomeNotRetained
	// OutcomeStoreFull: a bounded store had no room for a new key.
	OutcomeStoreFull
	// OutcomeMisconfigured: the method's policy cannot work (Err is a
	// [*MethodConfigError]); the call failed closed with INTERNAL and the
	// handler did not run.
	OutcomeMisconfigured
)

var outcomeNames = [...]string{
	OutcomeExecuted: "executed", OutcomeReplayed: "replayed", OutcomeInFlight: "in_flight",
	OutcomeKeyReused: "key_reused", OutcomeKeyMissing: "key_missing", OutcomeKeyInvalid: "key_invalid",
	OutcomeStoreError: "store_error", OutcomeFailOpen: "fail_open", OutcomeReleased: "released",
	OutcomeLeaseRenewed: "lease_renewed", OutcomeLeaseLost: "lease_lost",
	OutcomeRecordCorrupt: "record_corrupt", OutcomeNotRetained: "not_retained", OutcomeStoreFull: "store_full",
	OutcomeMisconfigured: "misconfigured",
}

// String returns the outcome's snake_case name, for logs and metric labels.
func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}
