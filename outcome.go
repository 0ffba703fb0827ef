package idempotency

import (
	"context"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
)

// outcome encodes the record of the handler's result. It reports false when
// the result must not be kept: a retryable error, or a response that cannot
// be encoded.
func (i *interceptor) outcome(ctx context.Context, c *call, createdAt time.Time, resp any, herr error, stream *captureStream) ([]byte, bool) {
	rec := &idempotencyv1.Record{
		Version:     record.Version,
		State:       idempotencyv1.State_STATE_COMPLETED,
		Fingerprint: c.fingerprint,
		CreatedAt:   timestamppb.New(createdAt),
		CompletedAt: timestamppb.Now(),
	}
	rec.Header, rec.Trailer = stream.recorded()
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
		b, err := deterministic.Marshal(msg)
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
	data, err := record.Encode(rec)
	if err != nil {
		return nil, false
	}
	return data, true
}
