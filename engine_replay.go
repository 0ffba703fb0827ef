package idempotency

import (
	"context"
	"fmt"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
)

// replay answers from a stored record without running the work: the same
// message type and bytes, or the same status with its details, or a
// server stream's messages ([replayedStream]) and final status; the
// transport delivers the rest (a gRPC handler's header and trailer, with
// the replay marker). It returns the record too, nil when data does not
// decode.
func (e *engine) replay(ctx context.Context, c *call, data []byte) (*recordv1.Record, any, error) {
	rec := &c.record // the call's, with its timestamps: a replay runs no work
	if err := record.DecodeInto(rec, &c.createdAt, &c.completed, data, c.fingerprint); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, err)
	}
	resp, err := e.replayRecord(ctx, c, rec)
	return rec, resp, err
}

// replayRecord answers c from rec, a record that decoded for c's
// fingerprint.
func (e *engine) replayRecord(ctx context.Context, c *call, rec *recordv1.Record) (any, error) {
	c.isReplay = true
	if stream := rec.GetOutcome() == recordv1.Outcome_OUTCOME_STREAM; stream != c.streams && rec.GetOutcome() != recordv1.Outcome_OUTCOME_NOT_RETAINED {
		// A namespace shared by a server-streaming method and one that
		// answers once.
		return nil, fmt.Errorf("%w: outcome %v does not fit the call (server-streaming: %t)", ErrRecordCorrupt, rec.GetOutcome(), c.streams)
	}
	switch rec.GetOutcome() {
	case recordv1.Outcome_OUTCOME_RESPONSE:
		resp, err := decodeResponse(e.cfg.files, c.respType, c.otherNames, rec)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, err)
		}
		c.t.replayed(ctx, rec)
		return resp, nil
	case recordv1.Outcome_OUTCOME_ERROR:
		c.t.replayed(ctx, rec)
		return nil, replayedStatus(rec.GetStatus())
	case recordv1.Outcome_OUTCOME_STREAM:
		c.t.replayed(ctx, rec)
		return replayedStream(rec.GetMessages()), replayedStatus(rec.GetStatus())
	default: // OUTCOME_NOT_RETAINED; Decode admits no other.
		c.t.replayed(ctx, rec)
		return nil, ErrResponseNotRetained
	}
}
