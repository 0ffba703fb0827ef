package idempotency

import (
	"context"
	"fmt"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
)

// replay answers from a stored record without running the handler: the
// same message type and bytes, or the same status with its details, and the
// header and trailer the handler set, with the replay marker.
func (i *interceptor) replay(ctx context.Context, m *methodConfig, data, fingerprint []byte) (any, error) {
	rec, err := record.Decode(data, fingerprint)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, err)
	}
	switch rec.GetOutcome() {
	case recordv1.Outcome_OUTCOME_RESPONSE:
		resp, err := decodeResponse(i.cfg.files, m, rec)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, err)
		}
		setReplayMD(ctx, fromRecordMD(rec.GetHeader(), true), fromRecordMD(rec.GetTrailer(), false))
		return resp, nil
	case recordv1.Outcome_OUTCOME_ERROR:
		s := rec.GetStatus()
		setReplayMD(ctx, fromRecordMD(rec.GetHeader(), false), fromRecordMD(rec.GetTrailer(), true))
		return nil, status.FromProto(&spb.Status{Code: s.GetCode(), Message: string(s.GetMessage()), Details: s.GetDetails()}).Err()
	default: // OUTCOME_NOT_RETAINED; Decode admits no other.
		setReplayMD(ctx, fromRecordMD(rec.GetHeader(), false), fromRecordMD(rec.GetTrailer(), true))
		return nil, ErrResponseNotRetained
	}
}

// decodeResponse decodes the response rec holds into the method's response
// type, or, for a method the descriptor registry does not have, into the
// type rec names, looked up as [findMessageType] does in files.
func decodeResponse(files *protoregistry.Files, m *methodConfig, rec *recordv1.Record) (proto.Message, error) {
	mt := m.responseType
	name := protoreflect.FullName(rec.GetResponseType())
	switch {
	case mt == nil:
		var err error
		if mt, err = findMessageType(files, name); err != nil {
			return nil, fmt.Errorf("response type %q: %w", name, err)
		}
	case mt.Descriptor().FullName() != name:
		return nil, fmt.Errorf("record holds a %q, the method returns %q", name, mt.Descriptor().FullName())
	}
	resp := mt.New().Interface()
	if err := proto.Unmarshal(rec.GetResponse(), resp); err != nil {
		return nil, fmt.Errorf("response of type %q: %w", name, err)
	}
	return resp, nil
}

// setReplayMD sets the replayed header and trailer. Errors are ignored as
// grpc-go ignores them for handlers: they mean the stream is gone.
func setReplayMD(ctx context.Context, header, trailer map[string][]string) {
	if len(header) > 0 {
		_ = grpc.SetHeader(ctx, header)
	}
	if len(trailer) > 0 {
		_ = grpc.SetTrailer(ctx, trailer)
	}
}
