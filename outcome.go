package idempotency

import (
	"context"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
)

// outcome encodes the record of the handler's result into a pooled buffer,
// which the caller returns with putBuffer. It reports false when the result
// must not be kept: a retryable error, or a response that cannot be encoded.
func (i *interceptor) outcome(ctx context.Context, c *call, resp any, herr error) (*[]byte, bool) {
	now := time.Now()
	c.completed.Seconds, c.completed.Nanos = now.Unix(), int32(now.Nanosecond())
	rec := &c.record
	rec.Version = record.Version
	rec.State = idempotencyv1.State_STATE_COMPLETED
	rec.Fingerprint = c.fingerprint
	rec.CreatedAt, rec.CompletedAt = &c.createdAt, &c.completed
	rec.Header, rec.Trailer = c.stream.recorded()
	if herr != nil {
		st, ok := status.FromError(herr)
		if !ok || !i.cfg.storedCodes[st.Code()] {
			return nil, false
		}
		p := st.Proto()
		rec.Outcome = idempotencyv1.Outcome_OUTCOME_ERROR
		rec.Status = &idempotencyv1.Status{Code: p.GetCode(), Message: p.GetMessage(), Details: p.GetDetails()}
	} else {
		msg, ok := resp.(proto.Message)
		if !ok {
			return nil, false
		}
		respBuf := getBuffer()
		defer putBuffer(respBuf)
		b, err := deterministic.MarshalAppend((*respBuf)[:0], msg)
		*respBuf = b
		if err != nil {
			return nil, false
		}
		rec.ResponseType = string(msg.ProtoReflect().Descriptor().FullName())
		if len(b) > i.cfg.maxResponseBytes {
			rec.Outcome = idempotencyv1.Outcome_OUTCOME_NOT_RETAINED
			i.observe(ctx, c.method, OutcomeNotRetained, 0, nil)
		} else {
			rec.Outcome = idempotencyv1.Outcome_OUTCOME_RESPONSE
			rec.Response = b
		}
	}
	data := getBuffer()
	b, err := record.AppendEncode((*data)[:0], rec)
	*data = b
	if err != nil {
		putBuffer(data)
		return nil, false
	}
	return data, true
}
