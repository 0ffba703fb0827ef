package admin

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/grpc-idempotency/idempotency"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	httpv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/http/v1"
	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
	"github.com/grpc-idempotency/idempotency/store"
)

// Explain turns data, the stored outcome of a completed key (the
// [store.Info] Data of a lookup, or a value read from the store's backend
// by other means), into the form a person reads: its kind, its gRPC status
// with its details, its header and trailer metadata, and its response (or
// each message of a stream) as JSON, or the HTTP answer that
// httpidempotency stored, with the times the record holds.
//
// Messages are written as protojson writes them, with types resolved from
// files (the registry given the server, [idempotency.WithDescriptors]; nil
// is protoregistry.GlobalFiles, the server's default), preferring the generated type of a name
// when one is linked in, as the server's replays do, and from
// protoregistry.GlobalTypes for names files does not have. A message whose
// type is not known, or whose bytes do not read as it, is given as its
// bytes with the reason. The values of "-bin" metadata keys are in base64;
// text that is not UTF-8 has U+FFFD in place of its invalid bytes.
//
// It reads any record the server reads, checked as the server checks it
// except for its fingerprint, which belongs to the store's entry, and
// returns an error wrapping [store.ErrCorrupt] for bytes that are not one.
// It has no sealing keys: a record sealed by a server built with
// [idempotency.WithSealing] is such an error, which names the key that
// sealed it; the admin service ([NewService]) of a server that holds the
// key opens and reads it. It treats data as untrusted: it never panics,
// and an Outcome it returns always encodes, as proto and as protojson.
func Explain(data []byte, files *protoregistry.Files) (*adminv1.Outcome, error) {
	if id, ok := idempotency.SealedBy(data); ok {
		return nil, fmt.Errorf("%w: the record is sealed by key %q (WithSealing), and Explain has no keys: read it with the admin service of a server that holds the key", store.ErrCorrupt, id)
	}
	var probe recordv1.Record
	if err := proto.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
	}
	r, err := record.Decode(data, probe.GetFingerprint())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", store.ErrCorrupt, err)
	}
	return explain(r, newResolver(files)), nil
}

// httpResponseName is the type of the outcomes httpidempotency stores.
var httpResponseName = (*httpv1.Response)(nil).ProtoReflect().Descriptor().FullName()

// explain is [Explain] of a record already decoded and checked.
func explain(r *recordv1.Record, res resolver) *adminv1.Outcome {
	o := &adminv1.Outcome{
		ResponseType:  r.GetResponseType(),
		Header:        metadataOf(r.GetHeader()),
		Trailer:       metadataOf(r.GetTrailer()),
		CreateTime:    validTime(r.GetCreatedAt()),
		CompleteTime:  validTime(r.GetCompletedAt()),
		RecordVersion: r.GetVersion(),
	}
	switch r.GetOutcome() {
	case recordv1.Outcome_OUTCOME_RESPONSE:
		if h, ok := httpOf(r); ok {
			o.Kind, o.Http = adminv1.Kind_KIND_HTTP, h
			break
		}
		o.Kind = adminv1.Kind_KIND_RESPONSE
		o.Response = messageOf(res, r.GetResponseType(), r.GetResponse())
	case recordv1.Outcome_OUTCOME_ERROR:
		o.Kind = adminv1.Kind_KIND_ERROR
		o.Status = statusOf(res, r.GetStatus())
	case recordv1.Outcome_OUTCOME_STREAM:
		o.Kind = adminv1.Kind_KIND_STREAM
		o.Messages = make([]*adminv1.Message, len(r.GetMessages()))
		for i, m := range r.GetMessages() {
			o.Messages[i] = messageOf(res, r.GetResponseType(), m)
		}
		o.Status = statusOf(res, r.GetStatus()) // OK when the stream ended without an error
	case recordv1.Outcome_OUTCOME_NOT_RETAINED:
		o.Kind = adminv1.Kind_KIND_NOT_RETAINED
	}
	return o
}

// httpOf returns the HTTP answer of r, when r holds one that reads.
func httpOf(r *recordv1.Record) (*adminv1.HttpResponse, bool) {
	if protoreflect.FullName(r.GetResponseType()) != httpResponseName {
		return nil, false
	}
	var resp httpv1.Response
	if err := proto.Unmarshal(r.GetResponse(), &resp); err != nil {
		return nil, false // shown as a message that does not read
	}
	h := &adminv1.HttpResponse{Status: resp.GetStatus(), NotRetained: resp.GetNotRetained()}
	for _, f := range resp.GetHeaders() {
		h.Headers = append(h.Headers, &adminv1.Metadata{Key: f.GetName(), Values: f.GetValues()})
	}
	switch body := resp.GetBody(); {
	case len(body) == 0:
	case utf8.Valid(body):
		h.Body = &adminv1.HttpResponse_Text{Text: string(body)}
	default:
		h.Body = &adminv1.HttpResponse_Raw{Raw: body}
	}
	return h, true
}

// statusOf returns s as a person reads it; a nil s is OK.
func statusOf(res resolver, s *recordv1.Status) *adminv1.Status {
	out := &adminv1.Status{
		Code:     s.GetCode(),
		CodeName: code.Code(s.GetCode()).String(),
		Message:  text(s.GetMessage()),
	}
	for _, d := range s.GetDetails() {
		out.Details = append(out.Details, detailOf(res, d))
	}
	return out
}

// detailOf returns the status detail a as a message of the type its URL
// names.
func detailOf(res resolver, a *anypb.Any) *adminv1.Message {
	url := a.GetTypeUrl()
	return messageOf(res, url[strings.LastIndexByte(url, '/')+1:], a.GetValue())
}

// jsonDepth bounds the nesting of a message's JSON: a structpb.Value takes
// two messages per level, and a client decodes at most 10,000 nested
// messages, so a deeper message is given as its bytes.
const jsonDepth = 2000

// messageOf returns the message of type name encoded in b: as JSON when
// the type is known and b reads as it, and as b otherwise.
func messageOf(res resolver, name string, b []byte) *adminv1.Message {
	m := &adminv1.Message{Type: text([]byte(name))}
	raw := func(why string) *adminv1.Message {
		m.Content, m.RawReason = &adminv1.Message_Raw{Raw: b}, text([]byte(why))
		return m
	}
	full := protoreflect.FullName(name)
	if !full.IsValid() {
		return raw("not a message type name")
	}
	mt, err := res.FindMessageByName(full)
	if err != nil {
		return raw("the type is not in the server's descriptors")
	}
	msg := mt.New().Interface()
	if err := (proto.UnmarshalOptions{Resolver: res}).Unmarshal(b, msg); err != nil {
		return raw("the bytes do not read as the type: " + err.Error())
	}
	js, err := protojson.MarshalOptions{Resolver: res}.Marshal(msg)
	if err != nil {
		return raw("the message has no JSON form: " + err.Error())
	}
	v := &structpb.Value{}
	if err := (protojson.UnmarshalOptions{RecursionLimit: jsonDepth}).Unmarshal(js, v); err != nil {
		return raw("the message's JSON is nested too deep")
	}
	m.Content = &adminv1.Message_Json{Json: v}
	return m
}

// metadataOf returns the metadata md, with the values of "-bin" keys in
// base64.
func metadataOf(md []*recordv1.Metadata) []*adminv1.Metadata {
	out := make([]*adminv1.Metadata, 0, len(md))
	for _, e := range md {
		key := e.GetKey()
		bin := len(key) >= 4 && strings.EqualFold(key[len(key)-4:], "-bin")
		vals := make([]string, len(e.GetValues()))
		for i, v := range e.GetValues() {
			if bin {
				vals[i] = base64.StdEncoding.EncodeToString(v)
			} else {
				vals[i] = text(v)
			}
		}
		out = append(out, &adminv1.Metadata{Key: text([]byte(key)), Values: vals})
	}
	return out
}

// text returns b as a string, with U+FFFD for the bytes that are not UTF-8,
// so that it encodes as a proto string.
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// validTime returns ts when it is a valid timestamp (from year 1 to 9999),
// and nil otherwise, so that the outcome encodes as protojson.
func validTime(ts *timestamppb.Timestamp) *timestamppb.Timestamp {
	if ts.CheckValid() != nil {
		return nil
	}
	return ts
}
