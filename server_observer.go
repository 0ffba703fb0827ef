package idempotency

import (
	"context"
	"time"
)

// Observer is told of every decision the server interceptor makes. Observe
// runs on the request path and must not block.
//
// A failed store call is one [DecisionStoreError] event per attempt: storing
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
//
// An observer's context is the caller's: [ClaimFromContext] reports
// nothing in it, or, for a call nested in running work (an interceptor
// chained twice, [Do] called from a handler), the claim of that outer
// work, never the call's own. StoreKey names the call's key.
type Event struct {
	// Method is the full method name, or the operation of [Do] and [Once].
	Method string
	// Operation is what the call's key belongs to: the method's namespace
	// when its policy has one ([MethodPolicy].Namespace), the operation of
	// [Do] and [Once], else the full method name. Calls of one operation
	// share their keys, whatever their method.
	Operation string
	// StoreKey is the call's store key ([Claim].StoreKey): a hash of the
	// operation, the scope and the client's key, safe to log, and the key
	// an operator looks up, lists and purges with a [store.Inspector]. It
	// is empty for a decision made before the client's key was read: a
	// missing or invalid key, a misconfigured method, a stream too large.
	// A [DecisionPurged] carries the purged store key, and no Method,
	// Operation or Key.
	StoreKey string
	// Key is the client's idempotency key, set with StoreKey. It is the
	// caller's own data (it may name an order, a customer, a message):
	// log it only where such data may go. [NewSlogObserver] leaves it out
	// unless [WithSlogClientKey] asks for it, and otelidempotency never
	// records it.
	Key string
	// Decision is what the interceptor decided, or what happened.
	Decision Decision
	// StoreTime is the time spent in store calls for this decision. For
	// an [DecisionStoreError] it is the time of the one failed attempt, so
	// that a step retried several times counts each attempt's time once.
	StoreTime time.Duration
	// Err is the error behind the decision, if any. For a decision that
	// fails the call it matches, with errors.Is, the sentinel the caller
	// got (see [Decision]); for a [DecisionStoreError] of a retried step,
	// it is the store's own error.
	Err error
	// Attempt numbers the failed attempt of an [DecisionStoreError]: 1 for a
	// store step's first try, 2 for its first retry, and so on (a claim or
	// a lookup is tried once; storing an outcome, releasing a claim and
	// renewing a lease are retried). On a [DecisionTakenOver] and a
	// [DecisionRecovered] it is the claim's [Claim.Attempt] (2 or more).
	// It is 0 for every other decision.
	Attempt int
	// Cached is set on a [DecisionReplayed] answered from this server's
	// replay cache ([WithReplayCache]), without a store call; its
	// StoreTime is 0.
	Cached bool
}

// Decision is the kind of an [Event]: what the interceptor decided for a
// call, or what happened to it. (The outcome a handler's call had, stored
// and replayed, is another thing: see [TxOutcome].)
//
// Decisions name outcomes that are not errors too (executed, replayed,
// released, fail-open, lease renewed or lost, not retained). The [Event.Err]
// of one that fails the call matches the sentinel the caller got:
// errors.Is(e.Err, ErrKeyInUse) for [DecisionInFlight], and likewise
// [ErrKeyReused], [ErrKeyMissing], [ErrKeyInvalid], [ErrStoreUnavailable]
// (a [DecisionStoreError] of a claim), [ErrRecordCorrupt], [ErrStoreFull],
// [ErrMisconfigured], [ErrStreamTooLarge], [ErrResumeInvalid] and
// [ErrOutcomeUnknown] (for [DecisionBlocked]).
type Decision int

// Decisions.
const (
	// DecisionExecuted: the handler ran under a claim and its outcome was
	// stored.
	DecisionExecuted Decision = iota + 1
	// DecisionReplayed: a stored outcome was replayed; the handler did not run.
	DecisionReplayed
	// DecisionInFlight: the key was in flight; the call was rejected with
	// ABORTED.
	DecisionInFlight
	// DecisionKeyReused: the key was used with a different request.
	DecisionKeyReused
	// DecisionKeyMissing: a MODE_REQUIRED method was called without a key.
	DecisionKeyMissing
	// DecisionKeyInvalid: the key was malformed.
	DecisionKeyInvalid
	// DecisionStoreError: one attempt of a store call failed. A claim or
	// lookup that fails ends the call closed; a failed attempt to store
	// the outcome, release the claim or renew the lease is retried, each
	// attempt reported with its number in [Event.Attempt] and its own
	// StoreTime.
	DecisionStoreError
	// DecisionFailOpen: the store failed; the handler ran without
	// deduplication ([WithFailOpen]).
	DecisionFailOpen
	// DecisionReleased: the handler failed with a retryable error or panicked;
	// the claim was released so a retry runs it again. A claim that took
	// over an abandoned one is abandoned again instead, so that the retry
	// takes it over (or recovers it) again, knowing of the first attempt.
	DecisionReleased
	// DecisionLeaseRenewed: a running handler's lease was renewed.
	DecisionLeaseRenewed
	// DecisionLeaseLost: a running handler lost its claim, or the store
	// failed every attempt to store its outcome until the store timeout, so
	// that its claim ends with its lease; its outcome was returned but not
	// stored, and a retry may run it again.
	DecisionLeaseLost
	// DecisionRecordCorrupt: the stored record could not be read.
	DecisionRecordCorrupt
	// DecisionNotRetained: the outcome could not be kept (over the size
	// limit, not a proto message, or not encodable); the key was completed
	// with a record that refuses replays.
	DecisionNotRetained
	// DecisionStoreFull: a bounded store had no room for a new key.
	DecisionStoreFull
	// DecisionMisconfigured: the method's policy cannot work (Err is a
	// [*MethodConfigError]); the call failed closed with INTERNAL and the
	// handler did not run.
	DecisionMisconfigured
	// DecisionStreamTooLarge: a keyed client-streaming call's requests were
	// larger than [WithMaxStreamRequestBytes]; the call failed with
	// INVALID_ARGUMENT, nothing was claimed and the handler did not run.
	DecisionStreamTooLarge
	// DecisionResumeInvalid: a server-streaming call's [ResumeAfterKey] was
	// not one non-negative decimal integer; the call failed with
	// INVALID_ARGUMENT and the handler did not run.
	DecisionResumeInvalid
	// DecisionPurged: an operator purged a key through [Server.Purge]; its
	// Event has the StoreKey and no Method.
	DecisionPurged
	// DecisionBlocked: the key's claim was abandoned and the method's
	// [AbandonPolicy] blocks it, or its recovery could not tell the
	// outcome; the call failed with [ErrOutcomeUnknown] and nothing ran.
	DecisionBlocked
	// DecisionTakenOver: the key's claim was abandoned and this call took
	// it over, under a new claim whose [Claim.Attempt] the Event carries
	// in Attempt, to run the handler again ([AbandonRerun]) or the
	// method's [RecoverFunc] ([AbandonRecover]); the Event that follows
	// says how the run ended (executed, recovered, blocked, released).
	DecisionTakenOver
	// DecisionRecovered: the key's claim was abandoned and the method's
	// [RecoverFunc] gave its outcome, which was stored and answered; the
	// Event's Attempt is the claim's.
	DecisionRecovered
	// DecisionResolved: an operator resolved an abandoned key through
	// [Server.Resolve]; its Event has the StoreKey and no Method.
	DecisionResolved
)

var decisionNames = [...]string{
	DecisionExecuted: "executed", DecisionReplayed: "replayed", DecisionInFlight: "in_flight",
	DecisionKeyReused: "key_reused", DecisionKeyMissing: "key_missing", DecisionKeyInvalid: "key_invalid",
	DecisionStoreError: "store_error", DecisionFailOpen: "fail_open", DecisionReleased: "released",
	DecisionLeaseRenewed: "lease_renewed", DecisionLeaseLost: "lease_lost",
	DecisionRecordCorrupt: "record_corrupt", DecisionNotRetained: "not_retained", DecisionStoreFull: "store_full",
	DecisionMisconfigured: "misconfigured", DecisionStreamTooLarge: "stream_too_large",
	DecisionResumeInvalid: "resume_invalid", DecisionPurged: "purged",
	DecisionBlocked: "blocked", DecisionTakenOver: "taken_over", DecisionRecovered: "recovered",
	DecisionResolved: "resolved",
}

// String returns the decision's snake_case name, for logs and metric
// labels.
func (d Decision) String() string {
	if d > 0 && int(d) < len(decisionNames) {
		return decisionNames[d]
	}
	return "unknown"
}
