package idempotency_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/grpc-idempotency/idempotency"
)

// TestFingerprintAcrossSchemaChange: the server fingerprints the request it
// decoded, re-encoded deterministically, so a retry whose bytes did not
// change can still get another fingerprint when the server's message type
// changed between the attempts (a deploy during a retry), and then be
// refused as IDEMPOTENCY_KEY_REUSED. docs/operations.md quotes these rows.
func TestFingerprintAcrossSchemaChange(t *testing.T) {
	t.Parallel()
	// Field numbers of ChargeRequest: 1 customer, 2 currency (new), 3 amount,
	// 9 memo (new).
	cases := map[string]struct {
		client     []int32 // fields the client's message type has
		set        []int32 // fields the client sets
		before     []int32 // the server's fields before the deploy
		after      []int32 // and after
		wantChange bool
	}{
		"new field, clients do not send it":          {[]int32{1, 3}, []int32{1, 3}, []int32{1, 3}, []int32{1, 2, 3}, false},
		"new field sent, numbered after every other": {[]int32{1, 3, 9}, []int32{1, 3, 9}, []int32{1, 3}, []int32{1, 3, 9}, false},
		"new field sent, numbered before another":    {[]int32{1, 2, 3}, []int32{1, 2, 3}, []int32{1, 3}, []int32{1, 2, 3}, true},
		"new field with its zero value":              {[]int32{1, 2, 3}, []int32{1, 3}, []int32{1, 3}, []int32{1, 2, 3}, false},
		"field removed, still sent, not the last":    {[]int32{1, 2, 3}, []int32{1, 2, 3}, []int32{1, 2, 3}, []int32{1, 3}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := dynamicpb.NewMessage(chargeRequestType(t, tc.client))
			for _, n := range tc.set {
				f := req.Descriptor().Fields().ByNumber(protoreflect.FieldNumber(n))
				req.Set(f, fieldValue(f))
			}
			wire, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			fingerprint := func(fields []int32) []byte {
				m := dynamicpb.NewMessage(chargeRequestType(t, fields))
				if err := proto.Unmarshal(wire, m); err != nil {
					t.Fatal(err)
				}
				fp, err := idempotency.Fingerprint("/shop.v1.PaymentsService/Charge", m)
				if err != nil {
					t.Fatal(err)
				}
				return fp
			}
			if changed := !bytes.Equal(fingerprint(tc.before), fingerprint(tc.after)); changed != tc.wantChange {
				t.Fatalf("fingerprint changed across the deploy: %v, want %v", changed, tc.wantChange)
			}
		})
	}
}

// chargeRequestType builds shop.v1.ChargeRequest with the given fields:
// 1 customer (string), 2 currency (string), 3 amount_cents (int64), 9 memo
// (string), all proto3 fields without explicit presence.
func chargeRequestType(t *testing.T, fields []int32) protoreflect.MessageDescriptor {
	t.Helper()
	all := map[int32]*descriptorpb.FieldDescriptorProto{
		1: field("customer", 1, descriptorpb.FieldDescriptorProto_TYPE_STRING),
		2: field("currency", 2, descriptorpb.FieldDescriptorProto_TYPE_STRING),
		3: field("amount_cents", 3, descriptorpb.FieldDescriptorProto_TYPE_INT64),
		9: field("memo", 9, descriptorpb.FieldDescriptorProto_TYPE_STRING),
	}
	msg := &descriptorpb.DescriptorProto{Name: proto.String("ChargeRequest")}
	for _, n := range fields {
		msg.Field = append(msg.Field, all[n])
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:        proto.String("shop/v1/charge.proto"),
		Package:     proto.String("shop.v1"),
		Syntax:      proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{msg},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().Get(0)
}

func field(name string, n int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
	return &descriptorpb.FieldDescriptorProto{
		Name: proto.String(name), Number: proto.Int32(n), Type: typ.Enum(),
		Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String(name),
	}
}

// fieldValue is a value of f that is not its zero value.
func fieldValue(f protoreflect.FieldDescriptor) protoreflect.Value {
	if f.Kind() == protoreflect.Int64Kind {
		return protoreflect.ValueOfInt64(4200)
	}
	return protoreflect.ValueOfString(string(f.Name()) + "-value")
}
