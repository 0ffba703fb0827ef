package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/grpc-idempotency/idempotency"
	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

// A mode this version does not know (a newer options.proto's, say) fails
// the method closed rather than running it as OPTIONAL: the annotation may
// ask for more than OPTIONAL gives. A mode set in code overrides it, and a
// method named by WithMethodPolicy without one is refused at construction.
func TestUnknownProtoModeFailsClosed(t *testing.T) {
	t.Parallel()
	const method, file = testingv1.TestService_Required_FullMethodName, "idempotency/testing/v1/testing.proto"
	files := unknownModeFiles(t, 9)

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		svc := &testserver.Service{}
		client := testserver.New(t, svc, grpc.ChainUnaryInterceptor(
			idempotency.UnaryServerInterceptor(memStore(t), idempotency.WithDescriptors(files)))).Client(t)
		_, err := client.Required(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "p"})
		wantMisconfigured(t, err, method, file)
		if n := svc.Executions(); n != 0 {
			t.Fatalf("the handler ran %d times under an unknown mode", n)
		}
	})
	t.Run("mode set in code", func(t *testing.T) {
		t.Parallel()
		svc := &testserver.Service{}
		client := testserver.New(t, svc, grpc.ChainUnaryInterceptor(
			idempotency.UnaryServerInterceptor(memStore(t), idempotency.WithDescriptors(files),
				idempotency.WithMethodPolicy(method, idempotency.MethodPolicy{Mode: idempotency.ModeRequired})))).Client(t)
		for range 2 {
			if _, err := client.Required(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "p"}); err != nil {
				t.Fatal(err)
			}
		}
		if n := svc.Executions(); n != 1 {
			t.Fatalf("the handler ran %d times for one key, want 1", n)
		}
	})
	t.Run("validate", func(t *testing.T) {
		t.Parallel()
		idem := idempotency.NewServer(memStore(t), idempotency.WithDescriptors(files))
		srv := testserver.New(t, &testserver.Service{}, grpc.ChainUnaryInterceptor(idem.UnaryServerInterceptor()))
		err := idem.Validate(srv.GRPC)
		var ce *idempotency.MethodConfigError
		if !errors.As(err, &ce) || ce.Method != method || !strings.Contains(ce.Problem, "mode 9") {
			t.Fatalf("Validate = %v, want a MethodConfigError for %s and its mode 9", err, method)
		}
	})
	t.Run("named without a mode", func(t *testing.T) {
		t.Parallel()
		msg := panicOf(func() {
			idempotency.NewServer(memStore(t), idempotency.WithDescriptors(files),
				idempotency.WithMethodPolicy(method, idempotency.MethodPolicy{Lease: 1}))
		})
		if !strings.Contains(msg, method) || !strings.Contains(msg, "mode 9") {
			t.Fatalf("panic %q, want one naming %s and its mode 9", msg, method)
		}
	})
}

// unknownModeFiles returns the test service's registry, built from a
// descriptor set, with the mode of the Required method's option set to
// mode.
func unknownModeFiles(t *testing.T, mode int32) *protoregistry.Files {
	t.Helper()
	return editedDescriptorFiles(t, func(f *descriptorpb.FileDescriptorProto) {
		for _, svc := range f.GetService() {
			for _, m := range svc.GetMethod() {
				if m.GetName() == "Required" {
					policy := proto.GetExtension(m.GetOptions(), idempotencyv1.E_Method).(*idempotencyv1.MethodPolicy)
					policy.Mode = idempotencyv1.Mode(mode)
					proto.SetExtension(m.GetOptions(), idempotencyv1.E_Method, policy)
				}
			}
		}
	})
}
