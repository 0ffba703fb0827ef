package watermillidempotency_test

import (
	"encoding/hex"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	watermillv1 "github.com/grpc-idempotency/idempotency/watermillidempotency/internal/gen/idempotency/watermill/v1"
)

// TestProducedWireFormat: the stored outcome keeps its full name and its
// bytes, so records stored by earlier versions still decode. The bytes are
// those of two messages as earlier versions stored them (made when the
// generated package lived in the core module's internal/gen).
func TestProducedWireFormat(t *testing.T) {
	t.Parallel()
	const stored = "0a2c0a056f75742d31120f0a07636172726965721204706f737412090a037261771202fffe1a07736869707065640a0c0a056f75742d321a03000102"
	want := &watermillv1.Produced{Messages: []*watermillv1.Message{
		{Uuid: []byte("out-1"), Payload: []byte("shipped"), Metadata: []*watermillv1.Metadata{
			{Key: []byte("carrier"), Value: []byte("post")},
			{Key: []byte("raw"), Value: []byte("\xff\xfe")},
		}},
		{Uuid: []byte("out-2"), Payload: []byte{0, 1, 2}},
	}}
	if got := want.ProtoReflect().Descriptor().FullName(); got != "idempotency.watermill.v1.Produced" {
		t.Errorf("full name %s; want idempotency.watermill.v1.Produced", got)
	}
	b, err := hex.DecodeString(stored)
	if err != nil {
		t.Fatal(err)
	}
	got := &watermillv1.Produced{}
	if err := proto.Unmarshal(b, got); err != nil {
		t.Fatalf("decoding the stored bytes: %v", err)
	}
	if !proto.Equal(got, want) {
		t.Errorf("stored bytes decoded as %v; want %v", prototext.Format(got), prototext.Format(want))
	}
	again, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(again) != stored {
		t.Errorf("encoded as %x; want %s", again, stored)
	}
}
