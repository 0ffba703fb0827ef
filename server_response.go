package idempotency

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
)

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
