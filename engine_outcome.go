package idempotency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
	"github.com/grpc-idempotency/idempotency/internal/seal"
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
// the size limit, or one that does not encode, or whose encoding panics)
// becomes a not-retained record, which replays FAILED_PRECONDITION with
// [ErrResponseNotRetained]. Once a handler has run under a claim, its
// key is completed, never released for a second run.
func (e *engine) outcome(ctx context.Context, c *call, resp any, herr error) *[]byte {
	now := time.Now()
	c.completed.Seconds, c.completed.Nanos = now.Unix(), int32(now.Nanosecond())
	data := getBuffer()
	if err := e.encode(c, data, resp, herr); err != nil {
		// A not-retained record holds only what every record holds and its
		// outcome: it always encodes.
		rec := c.stamp()
		rec.Outcome = recordv1.Outcome_OUTCOME_NOT_RETAINED
		*data, _ = record.AppendEncode((*data)[:0], rec)
		e.observe(ctx, &c.subject, DecisionNotRetained, 0, err)
	}
	if s := c.sealed; s != nil {
		sealed := getBuffer()
		*sealed = s.key.Seal((*sealed)[:0], s.keyring.primary.ID, c.key, *data)
		e.seal.countSealed(s.keyring.primary.ID)
		putBuffer(data)
		data = sealed
	}
	return data
}

// encode encodes into data the record of c's outcome, which c's transport
// fills in ([transport.record]), and returns why it cannot be kept, if it
// cannot: the transport's reason, the size bound, or a panic. Once a
// handler has run, nothing may panic between its answer and its stored
// outcome, which would leave its claim in flight until the lease ends and
// then run it again.
func (e *engine) encode(c *call, data *[]byte, resp any, herr error) (err error) {
	rec, buf := c.stamp(), getBuffer()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("idempotency: encoding the outcome panicked: %v", v)
		}
		rec.Reset() // it may refer to buf
		putBuffer(buf)
	}()
	size, err := c.t.record(rec, resp, herr, buf)
	if err == nil && size > e.cfg.maxResponseBytes {
		err = errTooLarge
	}
	if err == nil {
		*data, err = record.AppendEncode((*data)[:0], rec)
	}
	return err
}

// stamp resets c's record to what every record holds (a handler may build
// more than one outcome: [NewTxOutcome]) and returns it.
func (c *call) stamp() *recordv1.Record {
	rec := &c.record
	rec.Reset()
	rec.Version = record.Version
	rec.State = recordv1.State_STATE_COMPLETED
	rec.Fingerprint = c.fingerprint
	rec.CreatedAt, rec.CompletedAt = &c.createdAt, &c.completed
	return rec
}

// replay answers from a stored record without running the work: the
// transport replays what the record holds ([transport.replay]). It returns
// the record too, nil when data does not decode.
func (e *engine) replay(ctx context.Context, c *call, data []byte) (*recordv1.Record, any, error) {
	switch s := c.sealed; {
	case s == nil && seal.IsSealed(data):
		return nil, nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, errSealingOff)
	case s == nil:
	case s.legacyFP && seal.IsSealed(data):
		return nil, nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, errSealedOld)
	case s.legacyFP:
		// A record written before sealing, under its unkeyed fingerprint.
	case !seal.IsSealed(data):
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

// maxPooledBuffer is the largest buffer kept for reuse; larger ones are left
// to the garbage collector so one huge response does not pin memory.
const maxPooledBuffer = 64 << 10

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// getBuffer returns an empty scratch buffer. Return it with putBuffer once
// nothing refers to its contents.
func getBuffer() *[]byte { return buffers.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) > maxPooledBuffer {
		return
	}
	*b = (*b)[:0]
	buffers.Put(b)
}
