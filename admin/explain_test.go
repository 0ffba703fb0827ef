package admin_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/grpc-idempotency/idempotency/admin"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
	"github.com/grpc-idempotency/idempotency/store"
)

// encode returns the stored form of r, a completed record of the current
// version with a fingerprint, whatever else r says.
func encode(t testing.TB, r *recordv1.Record) []byte {
	t.Helper()
	r = proto.CloneOf(r)
	r.Version, r.State, r.Fingerprint = record.Version, recordv1.State_STATE_COMPLETED, []byte("fp")
	b, err := record.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantEncodes fails the test unless o encodes as proto, decodes again
// equal, and encodes as protojson: what a client and a command line do
// with it.
func wantEncodes(t testing.TB, o *adminv1.Outcome) {
	t.Helper()
	b, err := proto.Marshal(o)
	if err != nil {
		t.Fatalf("proto.Marshal: %v", err)
	}
	back := &adminv1.Outcome{}
	if err := proto.Unmarshal(b, back); err != nil || !proto.Equal(back, o) {
		t.Fatalf("proto.Unmarshal = %v, %v; want the outcome back", back, err)
	}
	if _, err := protojson.Marshal(o); err != nil {
		t.Fatalf("protojson.Marshal: %v", err)
	}
}

// A message whose type the descriptors do not have, or whose bytes do not
// read as its type, is given as its bytes with the reason; a status
// message and metadata values that are not UTF-8 have U+FFFD in their
// place, "-bin" values are base64, and a detail of an unknown type is raw
// too. Every such outcome still encodes.
func TestExplainRaw(t *testing.T) {
	t.Parallel()
	unknown := &anypb.Any{TypeUrl: "type.googleapis.com/acme.v1.Secret", Value: []byte{1, 2, 3}}
	for _, tc := range []struct {
		name string
		rec  *recordv1.Record
		want *adminv1.Outcome
	}{
		{"unknown type", &recordv1.Record{Outcome: recordv1.Outcome_OUTCOME_RESPONSE, ResponseType: "acme.v1.Charge", Response: []byte{0x08, 0x01}},
			&adminv1.Outcome{Kind: adminv1.Kind_KIND_RESPONSE, ResponseType: "acme.v1.Charge", RecordVersion: record.Version,
				Response: &adminv1.Message{Type: "acme.v1.Charge", Content: &adminv1.Message_Raw{Raw: []byte{0x08, 0x01}}, RawReason: "the type is not in the server's descriptors"}}},
		{"not a type name", &recordv1.Record{Outcome: recordv1.Outcome_OUTCOME_RESPONSE, ResponseType: "no such name!", Response: []byte{1}},
			&adminv1.Outcome{Kind: adminv1.Kind_KIND_RESPONSE, ResponseType: "no such name!", RecordVersion: record.Version,
				Response: &adminv1.Message{Type: "no such name!", Content: &adminv1.Message_Raw{Raw: []byte{1}}, RawReason: "not a message type name"}}},
		{"error with odd text", &recordv1.Record{Outcome: recordv1.Outcome_OUTCOME_ERROR,
			Status:  &recordv1.Status{Code: 5, Message: []byte("no \xff such"), Details: []*anypb.Any{unknown}},
			Header:  []*recordv1.Metadata{{Key: "x-note", Values: [][]byte{[]byte("a\xffb")}}},
			Trailer: []*recordv1.Metadata{{Key: "X-Trace-Bin", Values: [][]byte{{0, 0xfe, 0xff}}}}},
			&adminv1.Outcome{Kind: adminv1.Kind_KIND_ERROR, RecordVersion: record.Version,
				Status: &adminv1.Status{Code: 5, CodeName: "NOT_FOUND", Message: "no \uFFFD such", Details: []*adminv1.Message{
					{Type: "acme.v1.Secret", Content: &adminv1.Message_Raw{Raw: []byte{1, 2, 3}}, RawReason: "the type is not in the server's descriptors"}}},
				Header:  []*adminv1.Metadata{{Key: "x-note", Values: []string{"a\uFFFDb"}}},
				Trailer: []*adminv1.Metadata{{Key: "X-Trace-Bin", Values: []string{"AP7/"}}}}},
		{"not retained", &recordv1.Record{Outcome: recordv1.Outcome_OUTCOME_NOT_RETAINED},
			&adminv1.Outcome{Kind: adminv1.Kind_KIND_NOT_RETAINED, RecordVersion: record.Version}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := admin.Explain(encode(t, tc.rec), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			wantEncodes(t, got)
		})
	}
	// Bytes that do not read as the type name the reason.
	got, err := admin.Explain(encode(t, &recordv1.Record{Outcome: recordv1.Outcome_OUTCOME_RESPONSE, ResponseType: "google.protobuf.Duration", Response: []byte{0xff}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.GetResponse(); !strings.HasPrefix(r.GetRawReason(), "the bytes do not read as the type") || len(r.GetRaw()) != 1 {
		t.Fatalf("response %v, want the raw byte and why", r)
	}
}

// A message nested deeper than a client decodes is given as its bytes,
// and the outcome still decodes.
func TestExplainDeepMessage(t *testing.T) {
	t.Parallel()
	v := structpb.NewStringValue("leaf")
	for range 3000 {
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	b, err := proto.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := admin.Explain(encode(t, &recordv1.Record{Outcome: recordv1.Outcome_OUTCOME_RESPONSE, ResponseType: "google.protobuf.Value", Response: b}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.GetResponse(); r.GetRawReason() != "the message's JSON is nested too deep" {
		t.Fatalf("response reason %q, want it too deep", r.GetRawReason())
	}
	wantEncodes(t, got)
}

// A response whose type has no generated Go type is given as JSON through
// the descriptors passed, as the server replays it (WithDescriptors).
func TestExplainDescriptors(t *testing.T) {
	t.Parallel()
	fd := &descriptorpb.FileDescriptorProto{
		Name: proto.String("acme/v1/charge.proto"), Package: proto.String("acme.v1"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Charge"),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name: proto.String("charge_id"), JsonName: proto.String("chargeId"), Number: proto.Int32(1),
				Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			}},
		}},
	}
	files, err := protodesc.NewFiles(&descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{fd}})
	if err != nil {
		t.Fatal(err)
	}
	data := encode(t, &recordv1.Record{Outcome: recordv1.Outcome_OUTCOME_RESPONSE, ResponseType: "acme.v1.Charge", Response: []byte("\x0a\x04ch_1")})
	got, err := admin.Explain(data, files)
	if err != nil {
		t.Fatal(err)
	}
	if s := got.GetResponse().GetJson().GetStructValue().GetFields()["chargeId"].GetStringValue(); s != "ch_1" {
		t.Fatalf("response %v, want chargeId ch_1", got.GetResponse())
	}
	if _, err := protoregistry.GlobalFiles.FindFileByPath("acme/v1/charge.proto"); err == nil {
		t.Fatal("acme/v1/charge.proto is in GlobalFiles; the test needs a file only the registry passed has")
	}
	if raw, _ := admin.Explain(data, nil); raw.GetResponse().GetRaw() == nil {
		t.Fatalf("with GlobalFiles, response %v; want it raw", raw.GetResponse())
	}
}

// Records stored by earlier versions of the library read, with their
// times.
func TestExplainEarlierRecords(t *testing.T) {
	t.Parallel()
	for name, kind := range map[string]adminv1.Kind{
		"v1-error.bin": adminv1.Kind_KIND_ERROR, "v1-response.bin": adminv1.Kind_KIND_RESPONSE,
		"v2-error.bin": adminv1.Kind_KIND_ERROR, "v2-response.bin": adminv1.Kind_KIND_RESPONSE,
		"v2-not-retained.bin": adminv1.Kind_KIND_NOT_RETAINED,
	} {
		data, err := os.ReadFile(filepath.Join("..", "internal", "record", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := admin.Explain(data, nil)
		if err != nil || got.GetKind() != kind || got.GetCreateTime() == nil || got.GetCompleteTime() == nil {
			t.Fatalf("%s: %v, %v; want a %v with its times", name, got, err, kind)
		}
		if r := got.GetResponse(); kind == adminv1.Kind_KIND_RESPONSE && r.GetJson() == nil {
			t.Fatalf("%s: response %v, want JSON", name, r)
		}
		wantEncodes(t, got)
	}
}

// Bytes that are not a record the server reads are an error wrapping
// store.ErrCorrupt: garbage, an in-flight state, an unknown version, an
// error record without a code.
func TestExplainCorrupt(t *testing.T) {
	t.Parallel()
	for name, data := range map[string][]byte{
		"garbage":     []byte("\xff\xff\xff"),
		"empty":       nil,
		"in flight":   mustEncode(t, &recordv1.Record{Version: record.Version, State: recordv1.State_STATE_IN_FLIGHT, Outcome: recordv1.Outcome_OUTCOME_NOT_RETAINED}),
		"new version": mustEncode(t, &recordv1.Record{Version: record.Version + 1, State: recordv1.State_STATE_COMPLETED, Outcome: recordv1.Outcome_OUTCOME_NOT_RETAINED}),
		"error no code": mustEncode(t, &recordv1.Record{Version: record.Version, State: recordv1.State_STATE_COMPLETED,
			Outcome: recordv1.Outcome_OUTCOME_ERROR, Status: &recordv1.Status{}}),
	} {
		if got, err := admin.Explain(data, nil); !errors.Is(err, store.ErrCorrupt) || got != nil {
			t.Errorf("%s: Explain = %v, %v; want ErrCorrupt", name, got, err)
		}
	}
}

func mustEncode(t testing.TB, r *recordv1.Record) []byte {
	t.Helper()
	b, err := record.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Explain never panics, whatever the bytes, and an outcome it returns
// always encodes as proto and protojson and decodes again.
func FuzzExplain(f *testing.F) {
	detail, err := anypb.New(durationpb.New(time.Second))
	if err != nil {
		f.Fatal(err)
	}
	value, err := proto.Marshal(structpb.NewStringValue("v"))
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range []*recordv1.Record{
		{Outcome: recordv1.Outcome_OUTCOME_RESPONSE, ResponseType: "google.protobuf.Value", Response: value,
			Header: []*recordv1.Metadata{{Key: "x-a-bin", Values: [][]byte{{0xff}}}}, CreatedAt: timestamppb.Now(), CompletedAt: timestamppb.Now()},
		{Outcome: recordv1.Outcome_OUTCOME_ERROR, Status: &recordv1.Status{Code: 9, Message: []byte("m"), Details: []*anypb.Any{detail}}},
		{Outcome: recordv1.Outcome_OUTCOME_STREAM, ResponseType: "google.protobuf.Duration", Messages: [][]byte{{0x08, 0x01}, {0xff}}},
		{Outcome: recordv1.Outcome_OUTCOME_RESPONSE, ResponseType: "idempotency.http.v1.Response", Response: []byte("\x08\xc9\x01\x1a\x02{}")},
		{Outcome: recordv1.Outcome_OUTCOME_NOT_RETAINED, CreatedAt: &timestamppb.Timestamp{Seconds: -1 << 62}},
	} {
		f.Add(encode(f, r))
	}
	for _, name := range []string{"v1-error.bin", "v2-response.bin"} {
		if b, err := os.ReadFile(filepath.Join("..", "internal", "record", "testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := admin.Explain(data, nil)
		if err != nil {
			if o != nil || !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("Explain = %v, %v; want nil and ErrCorrupt", o, err)
			}
			return
		}
		wantEncodes(t, o)
	})
}
