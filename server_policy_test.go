package idempotency_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/grpc-idempotency/idempotency"
	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

func TestDurationsFromProtoAndCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                 string
		opts                 []idempotency.Option
		method               string
		wantLease, wantRetry time.Duration
	}{
		{"defaults", nil, "do", idempotency.DefaultLease, idempotency.DefaultRetention},
		{"server-wide", []idempotency.Option{idempotency.WithLease(5 * time.Second), idempotency.WithRetention(48 * time.Hour)},
			"do", 5 * time.Second, 48 * time.Hour},
		{"retention floor", []idempotency.Option{idempotency.WithRetention(time.Minute)}, "do", idempotency.DefaultLease, time.Hour},
		{"proto option", nil, "tuned", 2 * time.Second, 2 * time.Hour},
		{"proto beats server-wide default", []idempotency.Option{idempotency.WithLease(5 * time.Second)}, "tuned", 2 * time.Second, 2 * time.Hour},
		{"code policy beats proto", []idempotency.Option{idempotency.WithMethodPolicy(testingv1.TestService_Tuned_FullMethodName,
			idempotency.MethodPolicy{Lease: 9 * time.Second})}, "tuned", 9 * time.Second, 2 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil, tc.opts...)
			ctx := withKey(t.Context(), "k")
			var err error
			if tc.method == "tuned" {
				_, err = f.client.Tuned(ctx, &testingv1.DoRequest{})
			} else {
				_, err = f.client.Do(ctx, &testingv1.DoRequest{})
			}
			if err != nil {
				t.Fatal(err)
			}
			calls := f.store.Calls()
			if len(calls) != 2 || calls[0].Duration != tc.wantLease || calls[1].Duration != tc.wantRetry {
				t.Fatalf("store calls %+v, want claim with lease %v then complete with retention %v", calls, tc.wantLease, tc.wantRetry)
			}
		})
	}
}

func TestModeOverriddenInCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil,
		idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{Mode: idempotency.ModeRequired}),
		idempotency.WithMethodPolicy(testingv1.TestService_Required_FullMethodName, idempotency.MethodPolicy{Mode: idempotency.ModeDisabled}))
	_, err := f.client.Do(t.Context(), &testingv1.DoRequest{})
	wantReason(t, err, codes.InvalidArgument, idempotency.ReasonKeyMissing)
	if _, err := f.client.Required(t.Context(), &testingv1.DoRequest{}); err != nil {
		t.Fatalf("Required disabled in code: %v", err)
	}
}

func TestKeyField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	req := &testingv1.DoRequest{RequestId: "req-123", Payload: "p"}
	for range 2 {
		if _, err := f.client.Keyed(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.srv.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (key from request_id)", n)
	}
	// Metadata wins over the field.
	if _, err := f.client.Keyed(withKey(t.Context(), "md-key"), req); err != nil {
		t.Fatal(err)
	}
	if n := f.srv.Service.Executions(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (metadata key is another key)", n)
	}
	_, err := f.client.Keyed(t.Context(), &testingv1.DoRequest{RequestId: "bad id"})
	wantReason(t, err, codes.InvalidArgument, idempotency.ReasonKeyInvalid)
}

func TestKeyFieldSetInCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName,
		idempotency.MethodPolicy{Mode: idempotency.ModeRequired, KeyField: "payload"}))
	for range 2 {
		if _, err := f.client.Do(t.Context(), &testingv1.DoRequest{Payload: "from-field"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.srv.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestCustomMetadataKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithMetadataKey("X-Request-Key"))
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-request-key", "k")
	for range 2 {
		if _, err := f.client.Required(ctx, &testingv1.DoRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.srv.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestScopeIsolatesCallers(t *testing.T) {
	t.Parallel()
	tenant := func(ctx context.Context) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("tenant"); len(v) == 1 {
			return v[0], nil
		}
		return "", status.Error(codes.Unauthenticated, "no tenant")
	}
	f := newFixture(t, nil, idempotency.WithScope(tenant))
	call := func(who string) (*testingv1.DoResponse, error) {
		ctx := metadata.AppendToOutgoingContext(withKey(t.Context(), "shared-key"), "tenant", who)
		return f.client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
	}
	a, err := call("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := call("b")
	if err != nil {
		t.Fatal(err)
	}
	if a.GetExecution() == b.GetExecution() {
		t.Fatal("tenant b got tenant a's answer")
	}
	if a2, err := call("a"); err != nil || a2.GetExecution() != a.GetExecution() {
		t.Fatalf("tenant a's retry: %v, %v; want its own replay", a2, err)
	}
	if _, err := f.client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("scope error: %v, want the scope function's status", err)
	}
}

func TestStreamingPassesThrough(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	stream, err := f.client.Stream(withKey(t.Context(), "k"))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&testingv1.DoRequest{Payload: "s"}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil || resp.GetPayload() != "s" {
		t.Fatalf("stream echo: %v, %v", resp, err)
	}
	_ = stream.CloseSend()
	if n := len(f.store.Calls()); n != 0 {
		t.Fatalf("store saw %d calls for a stream", n)
	}
}

func TestConfigurationErrors(t *testing.T) {
	t.Parallel()
	mem := memorystore.New()
	t.Cleanup(func() { _ = mem.Close() })
	// A method named by WithMethodPolicy is checked at construction, its
	// proto option included; the panic names the method and its file.
	named := func(files *protoregistry.Files) []idempotency.Option {
		return []idempotency.Option{idempotency.WithDescriptors(files),
			idempotency.WithMethodPolicy("/bad.v1.Bad/Pay", idempotency.MethodPolicy{Lease: time.Minute})}
	}
	const where = "/bad.v1.Bad/Pay (bad/v1/bad.proto): "
	cases := []struct {
		name string
		opts []idempotency.Option
		want string
	}{
		{"streaming method with option", named(badFiles(t, true, "")), where + "idempotency.v1.method option on a streaming method"},
		{"key_field not a string", named(badFiles(t, false, "amount")), where + `key_field "amount" is not a singular string field`},
		{"key_field missing", named(badFiles(t, false, "nope")), where + `key_field "nope" names no field`},
		{"zero lease", []idempotency.Option{idempotency.WithLease(0)}, "lease"},
		{"empty metadata key", []idempotency.Option{idempotency.WithMetadataKey("")}, "metadata key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				p := recover()
				if p == nil || !strings.Contains(p.(error).Error(), tc.want) {
					t.Fatalf("panic %v, want an error mentioning %q", p, tc.want)
				}
			}()
			idempotency.UnaryServerInterceptor(mem, tc.opts...)
		})
	}
	idempotency.UnaryServerInterceptor(mem) // the registered test protos are valid
	// A bad method nobody names is left for its first call and Server.Validate.
	idempotency.UnaryServerInterceptor(mem, idempotency.WithDescriptors(badFiles(t, false, "nope")))
}

// badFiles builds a registry with one service whose annotated method is
// streaming, or has the given key_field.
func badFiles(t *testing.T, streaming bool, keyField string) *protoregistry.Files {
	t.Helper()
	opts := &descriptorpb.MethodOptions{}
	proto.SetExtension(opts, idempotencyv1.E_Method, &idempotencyv1.MethodPolicy{
		Mode: idempotencyv1.Mode_MODE_REQUIRED, KeyField: keyField,
	})
	fdp := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("bad/v1/bad.proto"),
		Package:    proto.String("bad.v1"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"idempotency/testing/v1/testing.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Bad"),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name:            proto.String("Pay"),
				InputType:       proto.String(".idempotency.testing.v1.DoRequest"),
				OutputType:      proto.String(".idempotency.testing.v1.DoResponse"),
				ClientStreaming: proto.Bool(streaming),
				Options:         opts,
			}},
		}},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	files := new(protoregistry.Files)
	if err := files.RegisterFile(fd); err != nil {
		t.Fatal(err)
	}
	return files
}

var _ = grpc.ChainUnaryInterceptor
var _ = testserver.Echo
