package idempotency

import (
	"context"
	"fmt"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
)

// replay answers from a stored record without running the work: the
// transport replays what the record holds ([transport.replay]). It returns
// the record too, nil when data does not decode.
func (e *engine) replay(ctx context.Context, c *call, data []byte) (*recordv1.Record, any, error) {
	switch s := c.sealed; {
	case s == nil && isSealed(data):
		return nil, nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, errSealingOff)
	case s == nil:
	case s.legacyFP && isSealed(data):
		return nil, nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, errSealedOld)
	case s.legacyFP:
		// A record written before sealing, under its unkeyed fingerprint.
	case !isSealed(data):
		return nil, nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, errNotSealed)
	default:
		buf := getBuffer()
		defer putBuffer(buf)
		plain, _, err := e.seal.open((*buf)[:0], s.keyring, s.scope, c.key, data, s.key)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, err)
		}
		*buf, data = plain, plain
	}
	rec := &c.record // the call's, with its timestamps: a replay runs no work
	if err := record.DecodeInto(rec, &c.createdAt, &c.completed, data, c.fingerprint); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, err)
	}
	c.isReplay = true
	resp, err := c.t.replay(ctx, rec)
	return rec, resp, err
}
