package idempotency_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

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
			rig := newClientRig(t, rigConfig{store: fs, server: tt.server, register: func(r grpc.ServiceRegistrar) {
				healthpb.RegisterHealthServer(r, health.NewServer())
			}})
			var dial []grpc.DialOption
			if tt.client {
				dial = append(dial, grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor()))
			}
			client := healthpb.NewHealthClient(rig.srv.Dial(t, dial...))
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
			for i, a := range rig.attempts.all() {
				if want := tt.key != ""; (len(a.keys) > 0) != want {
					t.Fatalf("attempt %d carried keys %q, want a key: %v", i+1, a.keys, want)
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
			call := methodOf(f.client, tt.method)
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
			if n := f.srv.Service.Executions(); n != tt.wantExecs {
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
