package idempotency

import (
	"context"
	"fmt"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

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

// replayedStatus is the error a stored status replays; nil for none (a
// stream that ended OK).
func replayedStatus(s *recordv1.Status) error {
	if s.GetCode() == 0 {
		return nil
	}
	return status.FromProto(&spb.Status{Code: s.GetCode(), Message: string(s.GetMessage()), Details: s.GetDetails()}).Err()
}

// otherNames says which records of another message than the call's
// response type decode into it.
type otherNames uint8

const (
	// noOtherName: none; the record is corrupt.
	noOtherName otherNames = iota
	// anyOtherName: any, for a method under a namespace: the operation is
	// the same across renames, and a message renamed with its fields
	// unchanged keeps its wire format (decision 70).
	anyOtherName
	// unknownName: one that names a message this process does not know
	// (renamed since), for [Do]: a message it knows is another message,
	// not a rename of Resp (decision 108).
	unknownName
)

// decodeResponse decodes the response rec holds into mt, or, when mt is
// nil (a method the descriptor registry does not have), into the type rec
// names, looked up as [findMessageType] does in files. A record that names
// another type than mt is corrupt, unless others admits it.
func decodeResponse(files *protoregistry.Files, mt protoreflect.MessageType, others otherNames, rec *recordv1.Record) (proto.Message, error) {
	name := protoreflect.FullName(rec.GetResponseType())
	switch {
	case mt == nil:
		var err error
		if mt, err = findMessageType(files, name); err != nil {
			return nil, fmt.Errorf("response type %q: %w", name, err)
		}
	case mt.Descriptor().FullName() == name:
	case others == noOtherName, others == unknownName && knownMessage(files, name):
		return nil, fmt.Errorf("record holds a %q, the call returns %q", name, mt.Descriptor().FullName())
	}
	resp := mt.New().Interface()
	if err := proto.Unmarshal(rec.GetResponse(), resp); err != nil {
		return nil, fmt.Errorf("response of type %q: %w", name, err)
	}
	return resp, nil
}

// knownMessage reports whether this process knows the message named name:
// files or the linked Go types have it.
func knownMessage(files *protoregistry.Files, name protoreflect.FullName) bool {
	_, err := findMessageType(files, name)
	return err == nil
}
