package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// work runs the work of c under its claim, on the handler's context: the
// handler, or, when the claim took over an abandoned one under
// [AbandonRecover], the method's [RecoverFunc] first, and the handler
// only if the recovery asks for it with [ErrRerun] (decision 292).
func (e *engine) work(ctx context.Context, c *call) (any, error) {
	if c.claim.Attempt <= 1 || c.cfg.abandoned != AbandonRecover {
		return c.t.run(ctx)
	}
	req := c.t.request()
	if req == nil || c.cfg.recover == nil {
		// A stream, or no RecoverFunc: never configured so (decisions
		// 292, 295); the key stays abandoned rather than run again.
		return nil, fmt.Errorf("%w: AbandonRecover without a RecoverFunc for the call", ErrMisconfigured)
	}
	resp, err := e.recoverOutcome(ctx, c, req)
	if errors.Is(err, ErrRerun) {
		c.fromRecovery = false
		return c.t.run(ctx)
	}
	return resp, err
}

// recoverOutcome runs the method's RecoverFunc for req and returns the
// outcome it found: a response of the call's type, or an error the method
// stores (c.fromRecovery is then set); [ErrRerun]; or an error that leaves
// the key abandoned: [ErrOutcomeUnknown] (the recovery returned it, or
// panicked), a response that is not of the call's type (an error wrapping
// [ErrMisconfigured]), or any other error, which the call returns as it
// is, so that a later retry recovers again.
func (e *engine) recoverOutcome(ctx context.Context, c *call, req proto.Message) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("%w: the recovery panicked: %v", ErrOutcomeUnknown, p)
		}
	}()
	msg, err := c.cfg.recover(ctx, req)
	switch {
	case errors.Is(err, ErrRerun), errors.Is(err, ErrOutcomeUnknown):
		return nil, err
	case err != nil:
		c.fromRecovery = e.keeps(err)
		return nil, err
	}
	if resp, err = c.t.recovered(msg); err != nil {
		return nil, err
	}
	c.fromRecovery = true
	return resp, nil
}

// errRecoveredType is the error of a recovery whose response is not of
// the call's response type.
func errRecoveredType(got proto.Message, want string) error {
	name := "nil"
	if got != nil {
		name = string(got.ProtoReflect().Descriptor().FullName())
	}
	return fmt.Errorf("%w: the RecoverFunc returned a response of type %s, not %s; the key stays abandoned", ErrMisconfigured, name, want)
}

// retakes reports whether c, which found its key abandoned under a claim
// that did not take it over, claims it again with the entry's
// fingerprint: under a policy that takes over, when [engine.sameRequest]
// found the entry's fingerprint to be c's request keyed by an older key
// of the sealing keyring (decision 294). An entry written before sealing
// (its fingerprint unkeyed) is not taken over: its outcome would be
// sealed under a fingerprint that says it is not, so the call gets
// [ErrOutcomeUnknown].
func (e *engine) retakes(c *call) bool {
	s := c.sealed
	return c.cfg.abandoned != AbandonBlock && s != nil && !s.legacyFP && !bytes.Equal(c.fingerprint, s.keyedFP)
}
