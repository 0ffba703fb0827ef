package idempotency

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
)

// errTooLarge is why an outcome over the size limit is not retained.
var errTooLarge = errors.New("idempotency: the outcome is larger than the retention limit")

// keeps reports whether the handler's result is kept: a response, or an
// error whose code is one of the stored codes. Any other error releases
// the claim, so a retry runs the handler again.
func (e *engine) keeps(herr error) bool {
	if herr == nil {
		return true
	}
	st, ok := status.FromError(herr)
	return ok && e.cfg.storedCodes[st.Code()]
}

// outcome encodes the record of a kept result ([engine.keeps]) into a
// pooled buffer, which the caller returns with putBuffer.
//
// It cannot fail: an outcome the record cannot hold in full (larger than
// the size limit, or one that does not encode) becomes a not-retained
// record, which replays FAILED_PRECONDITION with
// [ReasonResponseNotRetained]. Once a handler has run under a claim, its
// key is completed, never released for a second run.
func (e *engine) outcome(ctx context.Context, c *call, resp any, herr error) *[]byte {
	now := time.Now()
	c.completed.Seconds, c.completed.Nanos = now.Unix(), int32(now.Nanosecond())
	rec := &c.record
	rec.Reset() // a handler may build more than one outcome (NewTxOutcome)
	rec.Version = record.Version
	rec.State = recordv1.State_STATE_COMPLETED
	rec.Fingerprint = c.fingerprint
	rec.CreatedAt, rec.CompletedAt = &c.createdAt, &c.completed
	rec.Header, rec.Trailer = c.t.recorded()
	size := mdSize(rec.Header) + mdSize(rec.Trailer)

	var respBuf *[]byte
	var err error
	if st, ok := resp.(*streamed); ok {
		// A server stream: its messages, and its final status when it
		// ended in an error (a send grpc-go refused, else the handler's).
		rec.Outcome, rec.ResponseType, rec.Messages = recordv1.Outcome_OUTCOME_STREAM, st.typ, st.msgs
		size += st.size
		err = st.err
		if end := st.status(herr); end != nil {
			rec.Status = recordStatus(end)
			size += proto.Size(rec.Status)
		}
	} else if herr != nil {
		rec.Outcome = recordv1.Outcome_OUTCOME_ERROR
		rec.Status = recordStatus(herr)
		size += proto.Size(rec.Status)
	} else if msg, ok := resp.(proto.Message); !ok {
		err = errNotProto
	} else {
		respBuf = getBuffer()
		defer func() {
			rec.Response = nil // the buffer goes back to the pool
			putBuffer(respBuf)
		}()
		rec.Outcome = recordv1.Outcome_OUTCOME_RESPONSE
		*respBuf, rec.ResponseType, err = encodeMessage((*respBuf)[:0], msg)
		rec.Response = *respBuf
		size += len(*respBuf)
	}
	if err == nil && size > e.cfg.maxResponseBytes {
		err = errTooLarge
	}
	data := getBuffer()
	if err == nil {
		if *data, err = record.AppendEncode((*data)[:0], rec); err == nil {
			return data
		}
	}
	notRetained(rec)
	// A not-retained record holds only a version, enums, the fingerprint
	// and timestamps: it always encodes.
	*data, _ = record.AppendEncode((*data)[:0], rec)
	e.observe(ctx, c.method, DecisionNotRetained, 0, err)
	return data
}

// notRetained reduces rec to a not-retained record, dropping everything
// that may be what could not be kept.
func notRetained(rec *recordv1.Record) {
	rec.Outcome = recordv1.Outcome_OUTCOME_NOT_RETAINED
	rec.ResponseType, rec.Response, rec.Status, rec.Messages = "", nil, nil, nil
	rec.Header, rec.Trailer = nil, nil
}
