package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-idempotency/idempotency"
	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"
)

const (
	testFile = "idempotency/testing/v1/testing.proto"
	badFile  = "bad/v1/bad.proto"
	badPay   = "/bad.v1.Bad/Pay"   // unary, key_field names no field
	badWatch = "/bad.v1.Bad/Watch" // bidirectional streaming, with the option
)

// A KeyField set in code that is not a singular string field of the
// method's request panics at construction, naming the method and its file.
func TestKeyFieldMistypedInCodePanics(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	for _, field := range []string{"reqest_id", "amount", "sleep"} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			msg := panicOf(func() {
				idempotency.UnaryServerInterceptor(mem, idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName,
					idempotency.MethodPolicy{Mode: idempotency.ModeRequired, KeyField: field}))
			})
			for _, want := range []string{testingv1.TestService_Do_FullMethodName, testFile, quoted(field)} {
				if !strings.Contains(msg, want) {
					t.Fatalf("panic %q, want it to name %q", msg, want)
				}
			}
		})
	}
}

// A method the descriptor registry does not know is accepted at
// construction; its KeyField is checked on its first call, against the
// request, and a bad one fails every call closed: the handler never runs
// without the deduplication its policy asked for.
func TestKeyFieldOfUnknownMethodFailsClosed(t *testing.T) {
	t.Parallel()
	ev := &events{}
	srv := testserver.New(t, &testserver.Service{}, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(memStore(t),
		idempotency.WithObserver(ev),
		idempotency.WithDescriptors(new(protoregistry.Files)),
		idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{KeyField: "reqest_id"}))))
	client := srv.Client(t)
	for _, ctx := range []context.Context{t.Context(), withKey(t.Context(), "k-1")} {
		_, err := client.Do(ctx, &testingv1.DoRequest{RequestId: "r-1"})
		wantMisconfigured(t, err, testingv1.TestService_Do_FullMethodName, "")
	}
	if n := srv.Service.Executions(); n != 0 {
		t.Fatalf("handler ran %d times, want 0", n)
	}
	if n := ev.Count(idempotency.DecisionMisconfigured); n != 2 {
		t.Fatalf("observer saw %d %v events, want 2", n, idempotency.DecisionMisconfigured)
	}
}

// With WithDescriptors and a registry built from a descriptor set (not the
// generated one), a proto key_field works: the field is resolved on the
// request's own descriptor.
func TestKeyFieldFromDescriptorSet(t *testing.T) {
	t.Parallel()
	srv := testserver.New(t, &testserver.Service{}, grpc.ChainUnaryInterceptor(
		recovery.UnaryServerInterceptor(), // a panic fails the test instead of the binary
		idempotency.UnaryServerInterceptor(memStore(t), idempotency.WithDescriptors(descriptorFiles(t)))))
	client := srv.Client(t)
	for range 2 {
		resp, err := client.Keyed(t.Context(), &testingv1.DoRequest{RequestId: "r-1", Payload: "p"})
		if err != nil || resp.GetExecution() != 1 {
			t.Fatalf("Keyed = %v, %v; want execution 1 (key from request_id)", resp, err)
		}
	}
	_, err := client.Keyed(t.Context(), &testingv1.DoRequest{Payload: "p"})
	wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyMissing.Reason)
	if n := srv.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

// A malformed annotation on a method the server does not call at
// construction (an unrelated linked-in proto) does not take the server
// down: the served methods work, Server.Validate names the bad ones, and
// the bad unary method fails its calls closed.
func TestUnrelatedMalformedAnnotation(t *testing.T) {
	t.Parallel()
	files := descriptorFiles(t, malformedFile())
	ev := &events{}
	var idem *idempotency.Server
	if msg := panicOf(func() {
		idem = idempotency.NewServer(memStore(t), idempotency.WithDescriptors(files), idempotency.WithObserver(ev))
	}); msg != "" {
		t.Fatalf("construction panicked: %s", msg)
	}
	var payRan atomic.Int64
	srv := testserver.NewWith(t, &testserver.Service{}, registerBad(&payRan), grpc.ChainUnaryInterceptor(idem.UnaryServerInterceptor()))
	client := srv.Client(t)

	for range 2 {
		if resp, err := client.Keyed(t.Context(), &testingv1.DoRequest{RequestId: "r-1"}); err != nil || resp.GetExecution() != 1 {
			t.Fatalf("Keyed = %v, %v; want execution 1", resp, err)
		}
	}
	_, err := client.Required(t.Context(), &testingv1.DoRequest{})
	wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyMissing.Reason)

	cc := srv.Dial(t)
	for _, ctx := range []context.Context{t.Context(), withKey(t.Context(), "k-1")} {
		err := cc.Invoke(ctx, badPay, &testingv1.DoRequest{RequestId: "r-1"}, new(testingv1.DoResponse))
		wantMisconfigured(t, err, badPay, badFile)
	}
	if n := payRan.Load(); n != 0 {
		t.Fatalf("the misconfigured handler ran %d times, want 0", n)
	}
	if n := ev.Count(idempotency.DecisionMisconfigured); n != 2 {
		t.Fatalf("observer saw %d %v events, want 2", n, idempotency.DecisionMisconfigured)
	}

	err = idem.Validate(srv.GRPC)
	if !errors.Is(err, idempotency.ErrMisconfigured) {
		t.Fatalf("Validate = %v, want ErrMisconfigured", err)
	}
	for _, want := range []string{badPay + " (" + badFile + ")", `key_field "nope"`, badWatch + " (" + badFile + ")", "streaming"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate = %q, want it to name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "TestService") {
		t.Fatalf("Validate = %q, reports a method that is fine", err)
	}
}

// Server.Validate checks the methods a server serves with the options the
// Server was built with.
func TestServerValidate(t *testing.T) {
	t.Parallel()
	plain := testserver.New(t, &testserver.Service{})
	files := descriptorFiles(t, malformedFile())
	var ran atomic.Int64
	withBad := testserver.NewWith(t, &testserver.Service{}, registerBad(&ran))
	tests := []struct {
		name string
		srv  *testserver.Server
		opts []idempotency.ServerOption
		want []string // substrings of the error; none: no error
	}{
		{name: "generated registry", srv: plain},
		{name: "descriptor set", srv: plain, opts: []idempotency.ServerOption{idempotency.WithDescriptors(files)}},
		{name: "code policy", srv: plain, opts: []idempotency.ServerOption{idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName,
			idempotency.MethodPolicy{Mode: idempotency.ModeRequired, KeyField: "request_id"})}},
		{name: "code policy fixes a bad key_field", srv: withBad, opts: []idempotency.ServerOption{idempotency.WithDescriptors(files),
			idempotency.WithMethodPolicy(badPay, idempotency.MethodPolicy{KeyField: "request_id"})},
			want: []string{badWatch}},
		{name: "malformed annotations", srv: withBad, opts: []idempotency.ServerOption{idempotency.WithDescriptors(files)},
			want: []string{badPay, badWatch, badFile}},
		{name: "policy for a method the server does not serve", srv: plain, opts: []idempotency.ServerOption{
			idempotency.WithMethodPolicy("/idempotency.testing.v1.TestService/Charge", idempotency.MethodPolicy{Mode: idempotency.ModeRequired})},
			want: []string{"/idempotency.testing.v1.TestService/Charge", "does not serve"}},
		{name: "KeyField on a method missing from the registry", srv: plain, opts: []idempotency.ServerOption{
			idempotency.WithDescriptors(new(protoregistry.Files)),
			idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{KeyField: "request_id"})},
			want: []string{testingv1.TestService_Do_FullMethodName, testFile, "not in the descriptor registry"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := idempotency.NewServer(memStore(t), tt.opts...).Validate(tt.srv.GRPC)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want an error naming %q", tt.want)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("Validate = %q, want it to name %q", err, want)
				}
			}
		})
	}
}

// The options are stated once, in NewServer: the interceptor it returns
// and its start-up check read the same ones, so the check reports a
// WithMethodPolicy whose method name is mistyped without a second copy of
// the options, while the interceptor applies the policies as given.
func TestServerValidateReadsTheInterceptorsOptions(t *testing.T) {
	t.Parallel()
	const mistyped = "/idempotency.testing.v1.TestService/Dp"
	required := idempotency.MethodPolicy{Mode: idempotency.ModeRequired}
	idem := idempotency.NewServer(memStore(t),
		idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, required),
		idempotency.WithMethodPolicy(mistyped, required))
	srv := testserver.New(t, &testserver.Service{}, grpc.ChainUnaryInterceptor(idem.UnaryServerInterceptor()))

	err := idem.Validate(srv.GRPC)
	var ce *idempotency.MethodConfigError
	if !errors.As(err, &ce) || ce.Method != mistyped || !strings.Contains(ce.Problem, "does not serve") {
		t.Fatalf("Validate = %v, want a MethodConfigError for %s, which the server does not serve", err, mistyped)
	}
	if strings.Contains(err.Error(), testingv1.TestService_Do_FullMethodName) {
		t.Fatalf("Validate = %q, reports a method that is fine", err)
	}
	_, err = srv.Client(t).Do(t.Context(), &testingv1.DoRequest{})
	wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyMissing.Reason)
}

// wantMisconfigured fails the test unless err is the fail-closed answer of
// a misconfigured method: INTERNAL, the reason, a message naming the method
// and file (when known) and nothing of the configuration's detail.
func wantMisconfigured(t *testing.T, err error, method, file string) {
	t.Helper()
	wantReason(t, err, codes.Internal, idempotency.ErrMisconfigured.Reason)
	msg := status.Convert(err).Message()
	if !strings.Contains(msg, method) || !strings.Contains(msg, file) {
		t.Fatalf("message %q, want it to name %s and %q", msg, method, file)
	}
	if strings.Contains(msg, "field") {
		t.Fatalf("message %q gives the client configuration detail", msg)
	}
}

// panicOf runs f and returns what it panicked with, as text, or "".
func panicOf(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	f()
	return ""
}

func quoted(s string) string { return `"` + s + `"` }

// descriptorFiles returns a registry built the way a server that loads a
// descriptor set (buf build, protoc --descriptor_set_out) builds it: from
// serialized descriptors of the test service, its imports and extra, and
// not from the generated code's registry.
func descriptorFiles(t *testing.T, extra ...*descriptorpb.FileDescriptorProto) *protoregistry.Files {
	t.Helper()
	return editedDescriptorFiles(t, nil, extra...)
}

// editedDescriptorFiles is descriptorFiles with edit applied to each file
// of the set (when not nil) before the registry is built from it.
func editedDescriptorFiles(t *testing.T, edit func(*descriptorpb.FileDescriptorProto), extra ...*descriptorpb.FileDescriptorProto) *protoregistry.Files {
	t.Helper()
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range []protoreflect.FileDescriptor{
		descriptorpb.File_google_protobuf_descriptor_proto,
		durationpb.File_google_protobuf_duration_proto,
		idempotencyv1.File_idempotency_v1_options_proto,
		testingv1.File_idempotency_testing_v1_testing_proto,
	} {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	set.File = append(set.File, extra...)
	if edit != nil {
		for _, f := range set.File {
			edit(f)
		}
	}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	parsed := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(b, parsed); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.NewFiles(parsed)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// malformedFile describes bad.v1.Bad: Pay, whose key_field names no field,
// and Watch, a bidirectional streaming method with the option.
func malformedFile() *descriptorpb.FileDescriptorProto {
	option := func(keyField string) *descriptorpb.MethodOptions {
		opts := &descriptorpb.MethodOptions{}
		proto.SetExtension(opts, idempotencyv1.E_Method, &idempotencyv1.MethodPolicy{
			Mode: idempotencyv1.Mode_MODE_REQUIRED, KeyField: keyField,
		})
		return opts
	}
	return &descriptorpb.FileDescriptorProto{
		Name:       proto.String(badFile),
		Package:    proto.String("bad.v1"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{testFile, "idempotency/v1/options.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Bad"),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name:       proto.String("Pay"),
				InputType:  proto.String(".idempotency.testing.v1.DoRequest"),
				OutputType: proto.String(".idempotency.testing.v1.DoResponse"),
				Options:    option("nope"),
			}, {
				Name:            proto.String("Watch"),
				InputType:       proto.String(".idempotency.testing.v1.DoRequest"),
				OutputType:      proto.String(".idempotency.testing.v1.DoResponse"),
				ClientStreaming: proto.Bool(true),
				ServerStreaming: proto.Bool(true),
				Options:         option(""),
			}},
		}},
	}
}

// registerBad serves bad.v1.Bad as generated code would; Pay counts its
// executions in ran.
func registerBad(ran *atomic.Int64) func(grpc.ServiceRegistrar) {
	pay := func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		req := new(testingv1.DoRequest)
		if err := dec(req); err != nil {
			return nil, err
		}
		handler := func(context.Context, any) (any, error) {
			ran.Add(1)
			return &testingv1.DoResponse{}, nil
		}
		if interceptor == nil {
			return handler(ctx, req)
		}
		return interceptor(ctx, req, &grpc.UnaryServerInfo{FullMethod: badPay}, handler)
	}
	return func(r grpc.ServiceRegistrar) {
		r.RegisterService(&grpc.ServiceDesc{
			ServiceName: "bad.v1.Bad",
			HandlerType: (*any)(nil),
			Methods:     []grpc.MethodDesc{{MethodName: "Pay", Handler: pay}},
			Streams: []grpc.StreamDesc{{StreamName: "Watch", ClientStreams: true, ServerStreams: true,
				Handler: func(any, grpc.ServerStream) error { return nil }}},
			Metadata: badFile,
		}, struct{}{})
	}
}

// TestMethodConfigErrorFields: the panic value of a policy that cannot
// work is a *MethodConfigError naming the method, its proto file and the
// problem, and it matches ErrMisconfigured.
func TestMethodConfigErrorFields(t *testing.T) {
	t.Parallel()
	var p any
	func() {
		defer func() { p = recover() }()
		idempotency.UnaryServerInterceptor(memStore(t), idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName,
			idempotency.MethodPolicy{Mode: idempotency.ModeRequired, KeyField: "reqest_id"}))
	}()
	err, _ := p.(error)
	var ce *idempotency.MethodConfigError
	if !errors.As(err, &ce) || !errors.Is(err, idempotency.ErrMisconfigured) {
		t.Fatalf("panic value %#v, want a *MethodConfigError matching ErrMisconfigured", p)
	}
	if ce.Method != testingv1.TestService_Do_FullMethodName || ce.File != testFile || !strings.Contains(ce.Problem, quoted("reqest_id")) {
		t.Fatalf("MethodConfigError %+v, want method %s, file %s and the field in the problem", ce, testingv1.TestService_Do_FullMethodName, testFile)
	}
}

// WithOperationPolicy panics, naming itself and the operation, on the
// fields that mean nothing for an operation and on negative durations.
func TestWithOperationPolicyPanics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		op   string
		p    idempotency.MethodPolicy
		want string
	}{
		{"", idempotency.MethodPolicy{}, "must not be empty"},
		{"op", idempotency.MethodPolicy{Mode: idempotency.ModeRequired}, "op: Mode"},
		{"op", idempotency.MethodPolicy{KeyField: "request_id"}, "op: KeyField"},
		{"op", idempotency.MethodPolicy{Namespace: "other"}, "op: Namespace"},
		{"op", idempotency.MethodPolicy{Lease: -time.Second}, "op: Lease must not be negative"},
		{"/payments.v1.Payments/Capture", idempotency.MethodPolicy{}, `"/payments.v1.Payments/Capture" must not start with "/"`},
	} {
		msg := panicOf(func() { idempotency.NewServer(memStore(t), idempotency.WithOperationPolicy(tc.op, tc.p)) })
		if !strings.Contains(msg, "idempotency: WithOperationPolicy: ") || !strings.Contains(msg, tc.want) {
			t.Errorf("WithOperationPolicy(%q, %+v) panicked with %q, want %q", tc.op, tc.p, msg, tc.want)
		}
	}
}

// An operation's policy applies to Do, and Server.Validate does not take
// the operation for a method the server fails to serve.
func TestOperationPolicy(t *testing.T) {
	t.Parallel()
	srv := testserver.New(t, &testserver.Service{})
	idem := idempotency.NewServer(memStore(t), idempotency.WithOperationPolicy("payments.charge",
		idempotency.MethodPolicy{HandlerTimeout: time.Hour}))
	if err := idem.Validate(srv.GRPC); err != nil {
		t.Fatalf("Validate: %v, want nil", err)
	}
	for op, want := range map[string]time.Duration{"payments.charge": time.Hour, "other": defaultHandlerTimeout} {
		start := time.Now()
		if _, err := idempotency.Once(t.Context(), idem, op, "k", nil, func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			if got := d.Sub(start); !ok || got < want || got > want+time.Minute/2 {
				t.Errorf("%s: fn's deadline is %v after the call, want %v", op, got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// An operation, or a namespace, never starts with "/", as only a gRPC
// method's full name does, so that Server.StoreKey reads every name one
// way: Do and Once refuse one with ErrMisconfigured and run nothing, and
// WithMethodPolicy panics on such a Namespace, naming itself
// (TestOperationNamedLikeAMethod in package admin is the operator's side).
func TestOperationNamedLikeAMethodRefused(t *testing.T) {
	t.Parallel()
	srv := idempotency.NewServer(memStore(t))
	for _, op := range []string{"/payments.v1.Payments/Capture", "/"} {
		ran := false
		_, err := idempotency.Once(t.Context(), srv, op, "k-1", nil, func(context.Context) error { ran = true; return nil })
		if !errors.Is(err, idempotency.ErrMisconfigured) || !strings.Contains(err.Error(), `must not start with "/"`) || ran {
			t.Errorf("Once(%q) = %v, ran %v; want ErrMisconfigured naming the rule, nothing run", op, err, ran)
		}
		if err := idempotency.ValidateOperation(op); !errors.Is(err, idempotency.ErrMisconfigured) {
			t.Errorf("ValidateOperation(%q) = %v, want ErrMisconfigured", op, err)
		}
	}
	for _, op := range []string{"payments.capture", "shop.v1.Payments/Capture"} {
		if err := idempotency.ValidateOperation(op); err != nil {
			t.Errorf("ValidateOperation(%q) = %v, want nil", op, err)
		}
	}
	msg := panicOf(func() {
		idempotency.NewServer(memStore(t), idempotency.WithMethodPolicy("/shop.v1.Payments/Capture",
			idempotency.MethodPolicy{Namespace: "/payments.capture"}))
	})
	if !strings.Contains(msg, "idempotency: WithMethodPolicy: ") || !strings.Contains(msg, `Namespace "/payments.capture" must not start with "/"`) {
		t.Errorf("WithMethodPolicy with a Namespace starting with / panicked with %q", msg)
	}
}
