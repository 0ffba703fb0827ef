package idempotency_test

import (
	"bytes"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/grpc-idempotency/idempotency"
	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// A method renamed (proto package, service and messages: dyn.v1.Payments
// becomes dyn.v2.Billing) keeps its live keys under a namespace, whether
// the proto option or WithMethodPolicy gives it: the renamed server
// replays the old one's response, byte for byte, into the renamed
// response type, and the handler runs once. The fingerprint is the
// namespace's, or the replay would be refused as a reused key. Without a
// namespace the rename orphans the key and the handler runs again.
func TestNamespaceSurvivesRename(t *testing.T) {
	t.Parallel()
	const ns = "payments.charge"
	nsOption := &descriptorpb.MethodOptions{}
	proto.SetExtension(nsOption, idempotencyv1.E_Method, &idempotencyv1.MethodPolicy{Namespace: ns})
	for _, tc := range []struct {
		name       string
		opts       *descriptorpb.MethodOptions // of the old method
		policy     bool                        // the renamed server sets the namespace with WithMethodPolicy
		executions int64
	}{
		{"proto option, then WithMethodPolicy", nsOption, true, 1},
		{"no namespace", nil, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := memStore(t)
			var ran atomic.Int64
			oldFiles := dynamicFilesOf(t, "dyn.v1", "Payments", tc.opts)
			newFiles := dynamicFilesOf(t, "dyn.v2", "Billing", nil)
			var newOpts []idempotency.ServerOption
			if tc.policy {
				newOpts = append(newOpts, idempotency.WithMethodPolicy("/dyn.v2.Billing/Charge", idempotency.MethodPolicy{Namespace: ns}))
			}
			var answers [][]byte
			for _, s := range []struct {
				files   *protoregistry.Files
				service string
				opts    []idempotency.ServerOption
			}{{oldFiles, "dyn.v1.Payments", nil}, {newFiles, "dyn.v2.Billing", newOpts}} {
				md := mustFind[protoreflect.ServiceDescriptor](t, s.files, protoreflect.FullName(s.service)).Methods().Get(0)
				opts := append([]idempotency.ServerOption{idempotency.WithDescriptors(s.files)}, s.opts...)
				srv := newDynamicServer(t, s.service, md, &ran, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(mem, opts...)))
				req := dynamicpb.NewMessage(md.Input())
				req.Set(md.Input().Fields().ByName("amount"), protoreflect.ValueOfInt64(1250))
				resp := dynamicpb.NewMessage(md.Output())
				if err := srv.Dial(t).Invoke(withKey(t.Context(), "k-1"), "/"+s.service+"/Charge", req, resp); err != nil {
					t.Fatalf("%s: %v", s.service, err)
				}
				b, err := (proto.MarshalOptions{Deterministic: true}).Marshal(resp)
				if err != nil {
					t.Fatal(err)
				}
				answers = append(answers, b)
			}
			if n := ran.Load(); n != tc.executions {
				t.Fatalf("handler ran %d times, want %d", n, tc.executions)
			}
			if tc.executions == 1 && !bytes.Equal(answers[0], answers[1]) {
				t.Fatalf("renamed server answered %x, want the old one's %x", answers[1], answers[0])
			}
		})
	}
}

// A namespace is an operation: a method with a namespace and Do under the
// same name share their keys (Do replays the method's response), while a
// method without one never shares a key with Do, not even under an
// operation spelled as the method without its leading "/" (one with it is
// refused: TestOperationNamedLikeAMethodRefused).
func TestNamespaceKeySpace(t *testing.T) {
	t.Parallel()
	const method = "/idempotency.testing.v1.TestService/Do"
	for _, tc := range []struct {
		name, op  string
		namespace string
		shared    bool
	}{
		{"namespace shared with Do", "payments.charge", "payments.charge", true},
		{"method name as op", method[1:], "", false},
		{"another op", "payments.refund", "payments.charge", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := store.Store(memStore(t))
			srv := testserver.New(t, &testserver.Service{}, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(st,
				idempotency.WithMethodPolicy(method, idempotency.MethodPolicy{Namespace: tc.namespace}))))
			req := &testingv1.DoRequest{Payload: "p", Amount: 5}
			first, err := srv.Client(t).Do(withKey(t.Context(), "k-1"), req)
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int64
			resp, replayed, err := idempotency.Do(t.Context(), idempotency.NewServer(st), tc.op, "k-1", req, numbered(&runs, req))
			if err != nil {
				t.Fatal(err)
			}
			if replayed != tc.shared || (tc.shared && !proto.Equal(resp, first)) {
				t.Fatalf("Do: %v, replayed %v; want replayed %v (the method answered %v)", resp, replayed, tc.shared, first)
			}
		})
	}
}
