package idempotency_test

import (
	"bytes"
	"fmt"
	"log"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// While a request message changes across a deploy, fingerprint only what
// every server knows, so that a retry spanning the deploy is not refused as
// a reused key (docs/operations.md, "Proto changes and fingerprints"). Here
// the fields this server does not know are left out: a request from a newer
// client, with a field 9 this server has never heard of, gets the same
// fingerprint as one without it.
func ExampleWithFingerprint() {
	stableFields := func(method string, req proto.Message) ([]byte, error) {
		stable := proto.Clone(req)
		stable.ProtoReflect().SetUnknown(nil) // fields this server does not know yet
		return idempotency.Fingerprint(method, stable)
	}

	memory := memorystore.New()
	defer memory.Close()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		idempotency.UnaryServerInterceptor(memory, idempotency.WithFingerprint(stableFields)),
	))
	defer srv.Stop()

	known, err := proto.Marshal(wrapperspb.Int64(4200))
	if err != nil {
		log.Fatal(err)
	}
	newer := protowire.AppendString(protowire.AppendTag(known, 9, protowire.BytesType), "memo")
	fingerprint := func(wire []byte) []byte {
		req := new(wrapperspb.Int64Value)
		if err := proto.Unmarshal(wire, req); err != nil {
			log.Fatal(err)
		}
		fp, err := stableFields(chargeMethod, req)
		if err != nil {
			log.Fatal(err)
		}
		return fp
	}
	fmt.Println("same fingerprint:", bytes.Equal(fingerprint(known), fingerprint(newer)))
	// Output: same fingerprint: true
}
