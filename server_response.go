package idempotency

import (
	"errors"
	"fmt"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
)

// reply is how a transport whose work answers once (a unary handler, a
// client-streaming one, the function of [Do]) records and replays its
// answer: one response message, or a stored error. It holds what a
// replayed response decodes into.
type reply struct {
	mt     protoreflect.MessageType // nil: the type the record names, looked up in files
	files  *protoregistry.Files     // the server's descriptors ([WithDescriptors])
	others otherNames               // which records of another message decode into mt
}

// methodReply is the reply of a gRPC method under policy m: its response
// type, nil when the descriptor registry does not have the method; under
// a namespace, a record of any other message decodes into it.
func methodReply(files *protoregistry.Files, m *methodConfig) reply {
	r := reply{mt: m.responseType, files: files}
	if m.namespace != "" {
		r.others = anyOtherName
	}
	return r
}

// recordReply fills in rec with the answer resp, or with herr when it is
// not nil, and returns their size: resp is encoded into buf.
func recordReply(rec *recordv1.Record, resp any, herr error, buf *[]byte) (size int, err error) {
	if herr != nil {
		rec.Outcome = recordv1.Outcome_OUTCOME_ERROR
		rec.Status = recordStatus(herr)
		return proto.Size(rec.Status), nil
	}
	msg, ok := resp.(proto.Message)
	if !ok {
		return 0, errNotProto
	}
	rec.Outcome = recordv1.Outcome_OUTCOME_RESPONSE
	*buf, rec.ResponseType, err = encodeMessage((*buf)[:0], msg)
	rec.Response = *buf
	return len(*buf), err
}

// replay returns the answer rec holds: the same message type and bytes,
// or the same status with its details, or [ErrResponseNotRetained]. A
// record of a server stream (a namespace shared by a server-streaming
// method and one that answers once), or whose response does not decode,
// is corrupt.
func (r *reply) replay(rec *recordv1.Record) (any, error) {
	switch rec.GetOutcome() {
	case recordv1.Outcome_OUTCOME_RESPONSE:
		resp, err := decodeResponse(r.files, r.mt, r.others, rec)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrRecordCorrupt, err)
		}
		return resp, nil
	case recordv1.Outcome_OUTCOME_ERROR:
		return nil, replayedStatus(rec.GetStatus())
	case recordv1.Outcome_OUTCOME_NOT_RETAINED:
		return nil, ErrResponseNotRetained
	default: // OUTCOME_STREAM; Decode admits no other.
		return nil, fmt.Errorf("%w: outcome %v does not fit the call (server-streaming: false)", ErrRecordCorrupt, rec.GetOutcome())
	}
}

// errNotProto is why a response that is not a proto message (a custom
// codec) is not retained.
var errNotProto = errors.New("idempotency: the response is not a proto message")

// encodeMessage appends msg's deterministic encoding to b and returns it
// with msg's full name. A message that panics as it encodes (a nil
// *dynamicpb.Message, which has no descriptor) is an error like any other
// that does not encode: once a handler has run, nothing may panic between
// its answer and its stored outcome, which would leave its claim in
// flight until the lease ends and then run it again.
func encodeMessage(b []byte, msg proto.Message) (_ []byte, name string, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("idempotency: encoding the response panicked: %v", v)
		}
	}()
	name = string(msg.ProtoReflect().Descriptor().FullName())
	b, err = deterministic.MarshalAppend(b, msg)
	return b, name, err
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

// recordStatus is the record form of a handler's error.
func recordStatus(herr error) *recordv1.Status {
	p := status.Convert(herr).Proto()
	return &recordv1.Status{Code: p.GetCode(), Message: []byte(p.GetMessage()), Details: p.GetDetails()}
}

// replayedStatus is the error a stored status replays; nil for none (a
// stream that ended OK).
func replayedStatus(s *recordv1.Status) error {
	if s.GetCode() == 0 {
		return nil
	}
	return status.FromProto(&spb.Status{Code: s.GetCode(), Message: string(s.GetMessage()), Details: s.GetDetails()}).Err()
}

// recovered returns msg, a [RecoverFunc]'s response, as a response of the
// reply's type: an error wrapping [ErrMisconfigured] when it is nil or of
// another message (a reply of no known type takes any message), and the
// type's empty message for a nil one of the type, as gRPC sends it.
func (r *reply) recovered(msg proto.Message) (any, error) {
	if msg == nil || (r.mt != nil && msg.ProtoReflect().Descriptor().FullName() != r.mt.Descriptor().FullName()) {
		want := "the method's response"
		if r.mt != nil {
			want = string(r.mt.Descriptor().FullName())
		}
		return nil, errRecoveredType(msg, want)
	}
	if m := msg.ProtoReflect(); !m.IsValid() {
		return m.Type().New().Interface(), nil
	}
	return msg, nil
}
