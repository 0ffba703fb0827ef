package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
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

// WithAbandonedClaims sets what a keyed call does with a key whose claim
// was abandoned, for every method and operation whose [MethodPolicy]
// (or, for a method, proto option abandoned) does not say: [AbandonRerun]
// runs the handler again, telling it so ([Claim.Attempt]); [AbandonBlock]
// refuses the key with [ErrOutcomeUnknown] until an operator resolves it,
// so that no crash ever runs a handler twice. Default [AbandonRerun].
//
// It panics, naming itself, on [AbandonUnset], a value none of the
// constants has, and on [AbandonRecover]: a recovery is a function of one
// method or operation, set with its policy ([MethodPolicy.Recover]).
func WithAbandonedClaims(p AbandonPolicy) ServerOption {
	return serverOptionFunc(func(c *config) {
		switch p {
		case AbandonRerun, AbandonBlock:
		case AbandonRecover:
			c.invalid("WithAbandonedClaims", "AbandonRecover needs a RecoverFunc of each method or operation: set MethodPolicy{Abandoned: AbandonRecover, Recover: f} with WithMethodPolicy or WithOperationPolicy")
		default:
			c.invalid("WithAbandonedClaims", "policy must be AbandonRerun or AbandonBlock, got %s", p.describe())
		}
		c.abandoned = p
	})
}

// describe names p for a configuration error: its constant's name, or
// AbandonPolicy(n).
func (p AbandonPolicy) describe() string {
	if p > AbandonUnset && p <= AbandonRecover {
		return "Abandon" + strings.ToUpper(p.String()[:1]) + p.String()[1:]
	}
	return fmt.Sprintf("AbandonPolicy(%d)", int(p))
}

var abandonFromProto = map[idempotencyv1.AbandonPolicy]AbandonPolicy{
	idempotencyv1.AbandonPolicy_ABANDON_POLICY_RERUN:   AbandonRerun,
	idempotencyv1.AbandonPolicy_ABANDON_POLICY_BLOCK:   AbandonBlock,
	idempotencyv1.AbandonPolicy_ABANDON_POLICY_RECOVER: AbandonRecover,
}

// checkAbandoned records an error of option when p, the policy set in
// code for name, holds an abandon policy no setting has, or one that
// cannot work: Recover without a RecoverFunc, a RecoverFunc with another
// policy set (it would never run).
func (c *config) checkAbandoned(option, name string, p MethodPolicy) {
	switch {
	case p.Abandoned < AbandonUnset || p.Abandoned > AbandonRecover:
		c.invalid(option, "%s: Abandoned must be one of the AbandonPolicy constants, got %s", name, p.Abandoned.describe())
	case p.Abandoned == AbandonRecover && p.Recover == nil:
		c.invalid(option, "%s: Abandoned is AbandonRecover but Recover is nil: a recovery needs its RecoverFunc", name)
	case p.Abandoned != AbandonUnset && p.Abandoned != AbandonRecover && p.Recover != nil:
		c.invalid(option, "%s: Recover is set but Abandoned is %s: the RecoverFunc would never run", name, p.Abandoned.describe())
	}
}

// Why an abandon policy cannot work on a method.
const (
	// A newer options.proto may have a policy that asks for more than
	// this version gives: the method fails closed until set in code.
	problemUnknownAbandon = "idempotency.v1.method abandoned %d is none this version knows (ABANDON_POLICY_RERUN, ABANDON_POLICY_BLOCK, ABANDON_POLICY_RECOVER); set the method's Abandoned with WithMethodPolicy, or upgrade"
	problemNoRecover      = "idempotency.v1.method abandoned is ABANDON_POLICY_RECOVER, but no RecoverFunc is set for the method: give one with WithMethodPolicy(method, MethodPolicy{Recover: f})"
	// Decision 295: a recovery answers one response to one request.
	problemStreamRecover = "AbandonRecover on a streaming method: a RecoverFunc answers one response to one request, which a stream is not; use AbandonBlock or AbandonRerun"
)
