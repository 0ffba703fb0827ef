package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestDurationsFromProtoAndCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                 string
		opts                 []idempotency.ServerOption
		method               string
		wantLease, wantRetry time.Duration
	}{
		{"defaults", nil, "do", defaultLease, defaultRetention},
		{"server-wide", []idempotency.ServerOption{idempotency.WithLease(5 * time.Second), idempotency.WithRetention(48 * time.Hour)},
			"do", 5 * time.Second, 48 * time.Hour},
		{"retention floor", []idempotency.ServerOption{idempotency.WithRetention(time.Minute)}, "do", defaultLease, time.Hour},
		{"proto option", nil, "tuned", 2 * time.Second, 2 * time.Hour},
		{"proto beats server-wide default", []idempotency.ServerOption{idempotency.WithLease(5 * time.Second)}, "tuned", 2 * time.Second, 2 * time.Hour},
		{"code policy beats proto", []idempotency.ServerOption{idempotency.WithMethodPolicy(testingv1.TestService_Tuned_FullMethodName,
			idempotency.MethodPolicy{Lease: 9 * time.Second})}, "tuned", 9 * time.Second, 2 * time.Hour},
		// Durations over the ceilings are lowered to them, from every
		// source: the stores never see one of ~292 years.
		{"ceilings of the options", []idempotency.ServerOption{idempotency.WithLease(math.MaxInt64), idempotency.WithRetention(math.MaxInt64)},
			"do", maxLease, maxRetention},
		{"options just over the ceilings", []idempotency.ServerOption{idempotency.WithLease(maxLease + 1), idempotency.WithRetention(maxRetention + 1)},
			"do", maxLease, maxRetention},
		{"options at the ceilings", []idempotency.ServerOption{idempotency.WithLease(maxLease), idempotency.WithRetention(maxRetention)},
			"do", maxLease, maxRetention},
		{"ceilings of a code policy", []idempotency.ServerOption{idempotency.WithMethodPolicy(testingv1.TestService_Tuned_FullMethodName,
			idempotency.MethodPolicy{Lease: math.MaxInt64, Retention: math.MaxInt64})}, "tuned", maxLease, maxRetention},
		{"ceilings of a proto option of 300 years", []idempotency.ServerOption{idempotency.WithDescriptors(tunedFiles(t, 300*365*24*3600))},
			"tuned", maxLease, maxRetention},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil, tc.opts...)
			ctx := withKey(t.Context(), "k")
			var err error
			if tc.method == "tuned" {
				_, err = f.Client.Tuned(ctx, &testingv1.DoRequest{})
			} else {
				_, err = f.Client.Do(ctx, &testingv1.DoRequest{})
			}
			if err != nil {
				t.Fatal(err)
			}
			calls := f.Faults.Calls()
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
	_, err := f.Client.Do(t.Context(), &testingv1.DoRequest{})
	wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyMissing.Reason)
	if _, err := f.Client.Required(t.Context(), &testingv1.DoRequest{}); err != nil {
		t.Fatalf("Required disabled in code: %v", err)
	}
}

func TestKeyField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	req := &testingv1.DoRequest{RequestId: "req-123", Payload: "p"}
	for range 2 {
		if _, err := f.Client.Keyed(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (key from request_id)", n)
	}
	// Metadata wins over the field.
	if _, err := f.Client.Keyed(withKey(t.Context(), "md-key"), req); err != nil {
		t.Fatal(err)
	}
	if n := f.Service.Executions(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (metadata key is another key)", n)
	}
	_, err := f.Client.Keyed(t.Context(), &testingv1.DoRequest{RequestId: "bad id"})
	wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyInvalid.Reason)
}

func TestKeyFieldSetInCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName,
		idempotency.MethodPolicy{Mode: idempotency.ModeRequired, KeyField: "payload"}))
	for range 2 {
		if _, err := f.Client.Do(t.Context(), &testingv1.DoRequest{Payload: "from-field"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestCustomMetadataKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithMetadataKey("X-Request-Key"))
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-request-key", "k")
	for range 2 {
		if _, err := f.Client.Required(ctx, &testingv1.DoRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Service.Executions(); n != 1 {
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
		return f.Client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
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
	if _, err := f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("scope error: %v, want the scope function's status", err)
	}
}

func TestStreamingPassesThrough(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	stream, err := f.Client.Stream(withKey(t.Context(), "k"))
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
	if n := len(f.Faults.Calls()); n != 0 {
		t.Fatalf("store saw %d calls for a stream", n)
	}
}

func TestConfigurationErrors(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	// A method named by WithMethodPolicy is checked at construction, its
	// proto option included; the panic names the method and its file.
	named := func(files *protoregistry.Files) []idempotency.ServerOption {
		return []idempotency.ServerOption{idempotency.WithDescriptors(files),
			idempotency.WithMethodPolicy("/bad.v1.Bad/Pay", idempotency.MethodPolicy{Lease: time.Minute})}
	}
	const where = "/bad.v1.Bad/Pay (bad/v1/bad.proto): "
	cases := []struct {
		name string
		opts []idempotency.ServerOption
		want string
	}{
		{"bidirectional streaming method with option", named(badFiles(t, true, "")), where + "idempotency.v1.method option on a bidirectional streaming method"},
		{"key_field not a string", named(badFiles(t, false, "amount")), where + `key_field "amount" is not a singular string field`},
		{"key_field missing", named(badFiles(t, false, "nope")), where + `key_field "nope" names no field`},
	}
	// Every option that can be given a value that cannot work panics with
	// a message naming it.
	for _, o := range optionErrors {
		cases = append(cases, struct {
			name string
			opts []idempotency.ServerOption
			want string
		}{o.name, []idempotency.ServerOption{o.opt}, o.want})
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
	// The values at the edges of what works are accepted.
	idempotency.UnaryServerInterceptor(mem, idempotency.WithLease(1), idempotency.WithRetention(1),
		idempotency.WithLease(math.MaxInt64), idempotency.WithRetention(math.MaxInt64),
		idempotency.WithWaitForInFlight(0), idempotency.WithMaxResponseBytes(0), idempotency.WithRetryAfter(0),
		idempotency.WithStoreTimeout(1), idempotency.WithHandlerTimeout(1),
		idempotency.WithMetadataKey("X_Request.Key-2"), idempotency.WithStoredCodes(),
		idempotency.WithStoredCodes(codes.Canceled, codes.Unauthenticated),
		idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{}))
	// A bad method nobody names is left for its first call and Server.Validate.
	idempotency.UnaryServerInterceptor(mem, idempotency.WithDescriptors(badFiles(t, false, "nope")))
}

// tunedFiles returns the test service's registry, built from a descriptor
// set, with the lease and retention of Tuned's option set to seconds, which
// may be more than a time.Duration holds (durationpb.AsDuration clamps
// those to math.MaxInt64).
func tunedFiles(t *testing.T, seconds int64) *protoregistry.Files {
	t.Helper()
	return editedDescriptorFiles(t, func(f *descriptorpb.FileDescriptorProto) {
		for _, svc := range f.GetService() {
			for _, m := range svc.GetMethod() {
				if m.GetName() == "Tuned" {
					policy := proto.GetExtension(m.GetOptions(), idempotencyv1.E_Method).(*idempotencyv1.MethodPolicy)
					policy.Lease, policy.Retention = &durationpb.Duration{Seconds: seconds}, &durationpb.Duration{Seconds: seconds}
					proto.SetExtension(m.GetOptions(), idempotencyv1.E_Method, policy)
				}
			}
		}
	})
}

// optionErrors are the option values that cannot work, each with the start
// of the message [idempotency.UnaryServerInterceptor] panics with.
var optionErrors = []struct {
	name string
	opt  idempotency.ServerOption
	want string
}{
	{"zero lease", idempotency.WithLease(0), "idempotency: WithLease: lease must be positive, got 0s"},
	{"negative lease", idempotency.WithLease(-time.Second), "idempotency: WithLease: lease must be positive, got -1s"},
	{"zero retention", idempotency.WithRetention(0), "idempotency: WithRetention: retention must be positive, got 0s"},
	{"negative retention", idempotency.WithRetention(-time.Hour), "idempotency: WithRetention: retention must be positive"},
	{"negative wait", idempotency.WithWaitForInFlight(-time.Second), "idempotency: WithWaitForInFlight: wait must not be negative"},
	{"negative max response bytes", idempotency.WithMaxResponseBytes(-1), "idempotency: WithMaxResponseBytes: size must not be negative"},
	{"negative retry-after", idempotency.WithRetryAfter(-time.Second), "idempotency: WithRetryAfter: delay must not be negative"},
	{"zero store timeout", idempotency.WithStoreTimeout(0), "idempotency: WithStoreTimeout: store timeout must be positive"},
	{"negative store timeout", idempotency.WithStoreTimeout(-time.Second), "idempotency: WithStoreTimeout: store timeout must be positive"},
	{"zero handler timeout", idempotency.WithHandlerTimeout(0), "idempotency: WithHandlerTimeout: handler timeout must be positive"},
	{"negative handler timeout", idempotency.WithHandlerTimeout(-time.Second), "idempotency: WithHandlerTimeout: handler timeout must be positive"},
	{"empty metadata key", idempotency.WithMetadataKey(""), "idempotency: WithMetadataKey: metadata key must not be empty"},
	{"metadata key with a space", idempotency.WithMetadataKey("Idempotency Key!"), "idempotency: WithMetadataKey: metadata key \"Idempotency Key!\" has ' '"},
	{"metadata key with a non-ASCII letter", idempotency.WithMetadataKey("clé"), "idempotency: WithMetadataKey: metadata key \"clé\" has 'é'"},
	{"binary metadata key", idempotency.WithMetadataKey("Idempotency-Key-Bin"), "idempotency: WithMetadataKey: metadata key \"Idempotency-Key-Bin\" ends in -bin"},
	{"reserved metadata key", idempotency.WithMetadataKey("grpc-idempotency-key"), "idempotency: WithMetadataKey: metadata key \"grpc-idempotency-key\" starts with grpc-"},
	{"stored OK", idempotency.WithStoredCodes(codes.NotFound, codes.OK), "idempotency: WithStoredCodes: OK is not an error code"},
	{"stored code 17", idempotency.WithStoredCodes(codes.Code(17)), "idempotency: WithStoredCodes: Code(17) is not an error code"},
	{"stored UNAVAILABLE", idempotency.WithStoredCodes(codes.Unavailable), "idempotency: WithStoredCodes: Unavailable is a code the retry protocol uses"},
	{"stored ABORTED", idempotency.WithStoredCodes(codes.Aborted), "idempotency: WithStoredCodes: Aborted is a code the retry protocol uses"},
	{"nil fingerprint", idempotency.WithFingerprint(nil), "idempotency: WithFingerprint: fingerprint function must not be nil"},
	{"nil descriptors", idempotency.WithDescriptors(nil), "idempotency: WithDescriptors: descriptor registry must not be nil"},
	{"negative policy lease", idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{Lease: -1}),
		"idempotency: WithMethodPolicy: " + testingv1.TestService_Do_FullMethodName + ": Lease must not be negative"},
	{"negative policy retention", idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{Retention: -1}),
		"idempotency: WithMethodPolicy: " + testingv1.TestService_Do_FullMethodName + ": Retention must not be negative"},
	{"negative policy handler timeout", idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{HandlerTimeout: -1}),
		"idempotency: WithMethodPolicy: " + testingv1.TestService_Do_FullMethodName + ": HandlerTimeout must not be negative"},
	{"policy mode out of range", idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{Mode: idempotency.ModeDisabled + 1}),
		"idempotency: WithMethodPolicy: " + testingv1.TestService_Do_FullMethodName + ": Mode must be one of the Mode constants, got Mode(4)"},
	{"negative policy mode", idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{Mode: -1}),
		"idempotency: WithMethodPolicy: " + testingv1.TestService_Do_FullMethodName + ": Mode must be one of the Mode constants, got Mode(-1)"},
	{"policy cancellation out of range", idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{Cancellation: idempotency.CancellationCaller + 1}),
		"idempotency: WithMethodPolicy: " + testingv1.TestService_Do_FullMethodName + ": Cancellation must be one of the Cancellation constants, got Cancellation(3)"},
	{"operation cancellation out of range", idempotency.WithOperationPolicy("payments.charge", idempotency.MethodPolicy{Cancellation: -1}),
		"idempotency: WithOperationPolicy: payments.charge: Cancellation must be one of the Cancellation constants, got Cancellation(-1)"},
}

// badFiles builds a registry with one service whose annotated method is
// bidirectional streaming, or has the given key_field.
func badFiles(t *testing.T, bidi bool, keyField string) *protoregistry.Files {
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
				ClientStreaming: proto.Bool(bidi),
				ServerStreaming: proto.Bool(bidi),
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

// gRPC's own services (here the real health service) are left alone by
// both interceptors: the client sends no key and the server neither claims
// nor stores anything, even for a call that carries a key, unless the
// server names the method with WithMethodPolicy.
func TestHealthCheckLeftAlone(t *testing.T) {
	t.Parallel()
	check := healthpb.Health_Check_FullMethodName
	tests := []struct {
		name       string
		server     []idempotency.ServerOption
		client     bool   // through UnaryClientInterceptor
		key        string // sent in metadata by the caller
		wantStored bool
	}{
		{name: "through the client interceptor", client: true},
		{name: "key sent without the client interceptor", key: "k-health"},
		{name: "WithDefaultMode(ModeRequired) without a key", server: []idempotency.ServerOption{idempotency.WithDefaultMode(idempotency.ModeRequired)}},
		{name: "named by WithMethodPolicy", key: "k-health", wantStored: true,
			server: []idempotency.ServerOption{idempotency.WithMethodPolicy(check, idempotency.MethodPolicy{})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem := memStore(t)
			fs := faultstore.New(mem)
			rig := testkit.Start(t, testkit.Config{Store: fs, Options: tt.server, Register: func(r grpc.ServiceRegistrar) {
				healthpb.RegisterHealthServer(r, health.NewServer())
			}})
			var dial []grpc.DialOption
			if tt.client {
				dial = append(dial, grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor()))
			}
			client := healthpb.NewHealthClient(rig.Server.Dial(t, dial...))
			ctx := t.Context()
			if tt.key != "" {
				ctx = withKey(ctx, tt.key)
			}
			for i := range 2 {
				resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
				if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					t.Fatalf("Check %d = %v, %v; want SERVING", i+1, resp, err)
				}
			}
			if stored := len(fs.Calls()) > 0; stored != tt.wantStored {
				t.Fatalf("store calls %+v, want any: %v", fs.Calls(), tt.wantStored)
			}
			for i, a := range rig.Attempts.All() {
				if want := tt.key != ""; (len(a.Keys) > 0) != want {
					t.Fatalf("attempt %d carried keys %q, want a key: %v", i+1, a.Keys, want)
				}
			}
		})
	}
}

// WithDefaultMode sets the mode of methods that neither a proto option nor
// WithMethodPolicy gives one; annotated methods keep theirs, and a
// NO_SIDE_EFFECTS method stays disabled whatever the default.
func TestDefaultMode(t *testing.T) {
	t.Parallel()
	disabled := idempotency.WithDefaultMode(idempotency.ModeDisabled)
	required := idempotency.WithDefaultMode(idempotency.ModeRequired)
	tests := []struct {
		name      string
		opts      []idempotency.ServerOption
		method    string
		key       string // sent with both calls
		wantCode  codes.Code
		wantExecs int64 // after two calls
	}{
		{name: "default: unannotated deduplicated", method: "Do", key: "k", wantExecs: 1},
		{name: "disabled: unannotated untouched", opts: []idempotency.ServerOption{disabled}, method: "Do", key: "k", wantExecs: 2},
		{name: "disabled: MODE_REQUIRED still deduplicated", opts: []idempotency.ServerOption{disabled}, method: "Required", key: "k", wantExecs: 1},
		{name: "disabled: annotated without a mode still deduplicated", opts: []idempotency.ServerOption{disabled}, method: "Tuned", key: "k", wantExecs: 1},
		{name: "disabled: named by WithMethodPolicy deduplicated", method: "Do", key: "k", wantExecs: 1, opts: []idempotency.ServerOption{disabled,
			idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{})}},
		{name: "required: unannotated without a key refused", opts: []idempotency.ServerOption{required}, method: "Do",
			wantCode: codes.InvalidArgument},
		{name: "required: annotated without a mode runs without a key", opts: []idempotency.ServerOption{required}, method: "Tuned", wantExecs: 2},
		{name: "required: NO_SIDE_EFFECTS stays disabled", opts: []idempotency.ServerOption{required}, method: "Read", key: "k", wantExecs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil, tt.opts...)
			call := methodOf(f.Client, tt.method)
			ctx := t.Context()
			if tt.key != "" {
				ctx = withKey(ctx, tt.key)
			}
			for range 2 {
				_, err := call(ctx, &testingv1.DoRequest{Payload: "p"})
				if status.Code(err) != tt.wantCode {
					t.Fatalf("err = %v, want %v", err, tt.wantCode)
				}
			}
			if n := f.Service.Executions(); n != tt.wantExecs {
				t.Fatalf("handler ran %d times, want %d", n, tt.wantExecs)
			}
		})
	}
}

// A default mode that is not OPTIONAL, REQUIRED or DISABLED is a
// programming error: building the interceptor panics naming the option.
func TestDefaultModeInvalidPanics(t *testing.T) {
	t.Parallel()
	const want = "idempotency: WithDefaultMode:"
	mem := memorystore.New()
	t.Cleanup(func() { _ = mem.Close() }) // an unclosed store's sweeper is a leaked goroutine until GC runs
	tests := []struct {
		name  string
		build func()
	}{
		{"server, unspecified", func() {
			idempotency.UnaryServerInterceptor(mem, idempotency.WithDefaultMode(idempotency.ModeUnspecified))
		}},
		{"server, past the last mode", func() {
			idempotency.UnaryServerInterceptor(mem, idempotency.WithDefaultMode(idempotency.ModeDisabled+1))
		}},
		{"client, unspecified", func() {
			idempotency.UnaryClientInterceptor(idempotency.WithDefaultMode(idempotency.ModeUnspecified))
		}},
		{"client, negative", func() { idempotency.UnaryClientInterceptor(idempotency.WithDefaultMode(-1)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				p := recover()
				if msg := fmt.Sprint(p); p == nil || !strings.HasPrefix(msg, want) {
					t.Fatalf("panic %v, want one starting %q", p, want)
				}
			}()
			tt.build()
		})
	}
}

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
