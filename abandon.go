package idempotency

import (
	"context"
	"errors"

	"google.golang.org/protobuf/proto"
)

// AbandonPolicy says what a call does with a key whose claim was
// abandoned: its server died, or hung past its lease, while the handler
// may have run, in part or in full, and nobody stored its outcome.
type AbandonPolicy int

// Abandon policies.
const (
	// AbandonUnset takes the policy from the next level: a
	// [MethodPolicy]'s from the proto option, the proto option's from
	// [WithAbandonedClaims], and that one's default, [AbandonRerun].
	AbandonUnset AbandonPolicy = iota
	// AbandonRerun runs the handler again under a new claim, which says
	// so ([Claim.Attempt]). The handler may run twice.
	AbandonRerun
	// AbandonBlock refuses every call of the key with [ErrOutcomeUnknown]
	// until an operator resolves it. The handler never runs twice.
	AbandonBlock
	// AbandonRecover runs the method's [RecoverFunc] instead of the
	// handler, under a new claim, to find out what the abandoned attempt
	// did. The handler runs again only if the RecoverFunc asks for it.
	AbandonRecover
)

var abandonPolicyNames = [...]string{
	AbandonUnset: "unset", AbandonRerun: "rerun", AbandonBlock: "block", AbandonRecover: "recover",
}

// String returns "unset", "rerun", "block", "recover" or "unknown".
func (p AbandonPolicy) String() string {
	if p >= 0 && int(p) < len(abandonPolicyNames) {
		return abandonPolicyNames[p]
	}
	return "unknown"
}

// RecoverFunc finds out what an abandoned attempt of a key did, for a
// method or operation whose policy is [AbandonRecover]. It runs instead of
// the handler, with the request of the call and a context whose
// [ClaimFromContext] gives the new claim (Attempt > 1, Previous). It
// returns:
//
//   - the response the abandoned attempt gave (or would have given): it
//     is stored and answered as if the handler had answered;
//   - [ErrRerun]: nothing was done; the handler runs now, under the same
//     claim;
//   - [ErrOutcomeUnknown], or any error the method does not store, or a
//     panic: the key stays abandoned and the call fails (with
//     [ErrOutcomeUnknown], or the retryable error itself so that a later
//     retry recovers again);
//   - an error the method stores ([WithStoredCodes]): it is stored and
//     answered as the handler's would be.
type RecoverFunc func(ctx context.Context, req proto.Message) (proto.Message, error)

// ErrRerun is what a [RecoverFunc] returns to run the handler: the
// abandoned attempt did nothing that a new run would repeat.
var ErrRerun = errors.New("idempotency: recovery asks to run the handler")
