package idempotency

import (
	"context"
	"errors"
	"fmt"
)

// Settlement is what a message consumer tells its broker about a delivery
// once [Do] (or [Once]) has returned for it: the one mapping from an
// outcome to an acknowledgement, shared by every consumer adapter
// (jetstreamidempotency, kafkaidempotency, watermillidempotency) so that
// none can drift. [Server.Settle] returns it.
type Settlement int

// The settlements of a delivery. A consumer settles only after Do has
// returned, so every settlement follows a stored outcome, a claim that was
// never taken or was released, or a run whose outcome the store failed to
// take until the store timeout ([SettleAck]).
const (
	// SettleAck: the work is done, by this delivery or an earlier one, and
	// its outcome is stored, or the store failed to take it until the
	// store timeout ([WithStoreTimeout]): the claim then ends with its
	// lease, and the observer gets [DecisionLeaseLost]. Acknowledge
	// (commit) the message either way: a redelivery would run the work
	// again once the lease ends, while an ack lets only a later message
	// with the key run it again.
	SettleAck Settlement = iota + 1
	// SettleRetry: redeliver now. The handler ran and failed with an
	// error the server does not store, or panicked, so its claim was
	// released and the redelivery runs it again; or the consumer's context
	// ended before the handler started.
	SettleRetry
	// SettleRetryLater: redeliver after a delay ([Server.RetryAfter]). The
	// handler did not run: the key is in flight on another delivery
	// ([ErrKeyInUse]), the store is unavailable or full
	// ([ErrStoreUnavailable], [ErrStoreFull]), or the server's scope or
	// fingerprint function failed. The redelivery finds the outcome, or
	// runs the handler if the other claim was released or its lease ran
	// out.
	SettleRetryLater
	// SettleReject: final, whatever the consumer's own settings: stop
	// redelivering and dead-letter the message. Its outcome is a stored
	// error of the handler (on the delivery that ran it, or replayed to a
	// later one, whatever that error carries), or no redelivery can help:
	// the key was used for another body ([ErrKeyReused]), the record cannot
	// be read ([ErrRecordCorrupt]) or was not retained
	// ([ErrResponseNotRetained]), or the message has no valid key
	// ([ErrKeyMissing], [ErrKeyInvalid]) or the operation none
	// ([ErrMisconfigured]), or the key's claim was abandoned and the
	// operation's [AbandonPolicy] does not run it again
	// ([ErrOutcomeUnknown]: until an operator resolves the key, every
	// redelivery would be refused the same way, and an ack would drop the
	// message without anyone knowing whether its work was done; the dead
	// letter keeps it for the operator).
	SettleReject
)

// String returns "ack", "retry", "retry later" or "reject".
func (s Settlement) String() string {
	switch s {
	case SettleAck:
		return "ack"
	case SettleRetry:
		return "retry"
	case SettleRetryLater:
		return "retry later"
	case SettleReject:
		return "reject"
	}
	return fmt.Sprintf("Settlement(%d)", int(s))
}

// Settle returns how a message consumer settles a delivery whose [Do]
// returned err: ran reports whether this delivery's function ran (set it
// inside the function), replayed is what Do returned. With [Once], whose
// ran is returned, call Do with an *emptypb.Empty response instead (they
// share their records) to learn replayed: a stored error that Once returns
// is otherwise not told apart from an error of the store.
//
// The function's error decides on the delivery that ran it: nil is
// [SettleAck]; an error s stores ([Server.StoresError], its
// [WithStoredCodes]) is [SettleReject], since every later delivery gets it
// back; any other error, which released the claim, is [SettleRetry], even
// one that wraps a sentinel (a nested Do's [ErrKeyInUse]). On a delivery
// that did not run it, an error replayed is the function's stored error
// and [SettleReject], whatever its code, and so is an error s stores that
// an [AbandonRecover] operation's [RecoverFunc] returned; Do's own errors settle as the
// [Settlement] constants say; a context error (the consumer is stopping)
// is [SettleRetry], and any other error [SettleRetryLater]: only an
// outcome that no redelivery can change is rejected.
func (s *Server) Settle(ran, replayed bool, err error) Settlement {
	switch {
	case err == nil:
		return SettleAck
	case ran && s.StoresError(err):
		return SettleReject
	case ran:
		return SettleRetry
	case replayed:
		return SettleReject
	case s.StoresError(err) && Reason(err) == "" && !errors.As(err, new(*hookError)):
		// Neither run nor replayed, and not one of Do's own errors nor
		// a scope or fingerprint function's: a RecoverFunc's error that
		// the server stores, stored as the handler's would be (decision
		// 292), and replayed to every later delivery.
		return SettleReject
	}
	for _, later := range []error{ErrKeyInUse, ErrStoreUnavailable, ErrStoreFull} {
		if errors.Is(err, later) { // checked first: a store timeout wraps a context error
			return SettleRetryLater
		}
	}
	for _, final := range []error{ErrKeyReused, ErrRecordCorrupt, ErrResponseNotRetained, ErrKeyMissing, ErrKeyInvalid, ErrMisconfigured, ErrOutcomeUnknown} {
		if errors.Is(err, final) {
			return SettleReject
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return SettleRetry
	}
	// An error of the scope or fingerprint function, or one this version
	// does not know: never final, since the handler has not run.
	return SettleRetryLater
}
