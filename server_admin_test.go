package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/grpc-idempotency/idempotency"
	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	"github.com/grpc-idempotency/idempotency/internal/adminhook"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// tenantScope is a scope function that reads the caller's tenant from the
// "tenant" metadata.
func tenantScope(ctx context.Context) (string, error) {
	if v := metadata.ValueFromIncomingContext(ctx, "tenant"); len(v) == 1 {
		return v[0], nil
	}
	return "", nil
}

// Server.StoreKey gives the key the server's own calls are stored under,
// for a method without a namespace, a method whose namespace
// WithMethodPolicy or its proto option gives, a key read from a key field,
// and an operation of Do, each in the caller's scope: a lookup of the
// key finds the call's entry, and the key of another scope finds nothing.
// It gives the same key before the method's first call (its policy
// resolved on the spot) as after (its policy cached by the interceptor),
// and asking first does not change the policy the interceptor uses: the
// key field is still read.
func TestStoreKeyIsTheEngines(t *testing.T) {
	t.Parallel()
	const key = "order-7"
	nsOption := &descriptorpb.MethodOptions{}
	proto.SetExtension(nsOption, idempotencyv1.E_Method, &idempotencyv1.MethodPolicy{Namespace: "dyn.charge"})
	for _, tc := range []struct {
		name   string
		method string // the name given to StoreKey
		opts   func(t *testing.T) []idempotency.ServerOption
	}{
		{"method", testingv1.TestService_Do_FullMethodName, nil},
		{"WithMethodPolicy namespace", testingv1.TestService_Do_FullMethodName, func(*testing.T) []idempotency.ServerOption {
			return []idempotency.ServerOption{idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{Namespace: "orders.create"})}
		}},
		{"key field", testingv1.TestService_Keyed_FullMethodName, nil},
		{"proto option namespace", "/dyn.v1.Payments/Charge", func(t *testing.T) []idempotency.ServerOption {
			return []idempotency.ServerOption{idempotency.WithDescriptors(dynamicFilesOf(t, "dyn.v1", "Payments", nsOption))}
		}},
		{"operation", "orders.create", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := memStore(t)
			opts := []idempotency.ServerOption{idempotency.WithScope(tenantScope)}
			if tc.opts != nil {
				opts = append(opts, tc.opts(t)...)
			}
			srv := idempotency.NewServer(mem, opts...)
			before, err := srv.StoreKey(tc.method, "acme", key)
			if err != nil {
				t.Fatal(err)
			}
			callOnce(t, srv, tc.method, key)
			after, err := srv.StoreKey(tc.method, "acme", key)
			if err != nil || after != before {
				t.Fatalf("StoreKey after the call = %q, %v; before it %q", after, err, before)
			}
			info, err := mem.Lookup(t.Context(), after)
			if err != nil || info.State != store.StateCompleted {
				t.Fatalf("Lookup(StoreKey) = %+v, %v; want the call's completed entry", info, err)
			}
			other, err := srv.StoreKey(tc.method, "globex", key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := mem.Lookup(t.Context(), other); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Lookup of another scope's key = %v, want ErrNotFound", err)
			}
		})
	}
}

// callOnce makes one call of name with key through srv in tenant acme:
// over gRPC for the test service's methods (the key in request_id for
// Keyed), over a dynamic server for the dyn.v1 method, and with Do for an
// operation.
func callOnce(t *testing.T, srv *idempotency.Server, name, key string) {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "tenant", "acme")
	req := &testingv1.DoRequest{Payload: "p"}
	var err error
	switch name {
	case "/dyn.v1.Payments/Charge":
		md := mustFind[protoreflect.ServiceDescriptor](t, adminhook.Descriptors(srv), "dyn.v1.Payments").Methods().Get(0)
		var ran atomic.Int64
		s := newDynamicServer(t, "dyn.v1.Payments", md, &ran, grpc.ChainUnaryInterceptor(srv.UnaryServerInterceptor()))
		err = s.Dial(t).Invoke(withKey(ctx, key), name, dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output()))
	case "orders.create":
		// Do reads the scope from its own context, as a handler's.
		md, _ := metadata.FromOutgoingContext(ctx)
		var runs atomic.Int64
		_, _, err = idempotency.Do(metadata.NewIncomingContext(ctx, md), srv, name, key, req, numbered(&runs, req))
	case testingv1.TestService_Keyed_FullMethodName:
		req.RequestId = key
		_, err = testServer(t, srv).Keyed(ctx, req)
	default:
		_, err = testServer(t, srv).Do(withKey(ctx, key), req)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// testServer serves the test service behind srv's interceptors and
// returns a client.
func testServer(t *testing.T, srv *idempotency.Server) testingv1.TestServiceClient {
	t.Helper()
	return testserver.New(t, &testserver.Service{}, grpc.ChainUnaryInterceptor(srv.UnaryServerInterceptor())).Client(t)
}

// StoreKey refuses an empty name, and a key the server would refuse, with
// the KeyError of ValidateKey, which does not echo the key.
func TestStoreKeyRefuses(t *testing.T) {
	t.Parallel()
	srv := idempotency.NewServer(memStore(t))
	for _, tc := range []struct {
		name, method, key string
		keyErr            bool
	}{
		{"empty name", "", "k", false},
		{"empty key", "op", "", true},
		{"key with a space", "op", "bad key", true},
		{"key too long", "/pkg.S/M", strings.Repeat("k", idempotency.MaxKeyLen+1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := srv.StoreKey(tc.method, "", tc.key)
			if err == nil || got != "" {
				t.Fatalf("StoreKey = %q, %v; want an error", got, err)
			}
			var ke *idempotency.KeyError
			if errors.As(err, &ke) != tc.keyErr || (tc.keyErr && !errors.Is(err, idempotency.ErrKeyInvalid)) {
				t.Fatalf("error %v: KeyError %v, want %v", err, errors.As(err, &ke), tc.keyErr)
			}
			if len(tc.key) > 3 && strings.Contains(err.Error(), tc.key) {
				t.Fatalf("error %q echoes the key", err)
			}
		})
	}
}

// Server.Purge deletes a completed key and drops it from this server's
// replay cache at once: the next call with the key runs the handler again
// rather than replaying from memory. It is one purged event naming the
// store key, with no error. A purge the store refuses (a key in flight)
// returns the store's error and is no event; over a store that is not an
// Inspector, Purge is an error and calls nothing.
func TestServerPurge(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	r := testkit.Serve(t, testkit.Config{
		Store:   memStore(t),
		Options: []idempotency.ServerOption{idempotency.WithReplayCache(100, 1<<20, time.Hour)},
		Handler: func(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
			if req.GetPayload() == "block" {
				<-release
			}
			return testserver.Echo(ctx, method, req)
		},
	})
	client := r.Client(t)
	ctx := withKey(t.Context(), "k-purged")
	req := &testingv1.DoRequest{Payload: "p"}
	for range 2 { // executed, then replayed from the cache
		if resp, err := client.Do(ctx, req); err != nil || resp.GetExecution() != 1 {
			t.Fatalf("Do = %v, %v; want execution 1", resp, err)
		}
	}
	if n := r.Events.All()[1]; !n.Cached {
		t.Fatalf("second call %+v was not replayed from the cache", n)
	}
	key, err := r.Idempotency.StoreKey(testingv1.TestService_Do_FullMethodName, "", "k-purged")
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Idempotency.Purge(t.Context(), key, store.PurgeOptions{})
	if err != nil || info.State != store.StateCompleted || info.Key != key {
		t.Fatalf("Purge = %+v, %v; want the completed entry", info, err)
	}
	if resp, err := client.Do(ctx, req); err != nil || resp.GetExecution() != 2 {
		t.Fatalf("Do after the purge = %v, %v; want execution 2", resp, err)
	}
	var purged []idempotency.Event
	for _, e := range r.Events.All() {
		if e.Decision == idempotency.DecisionPurged {
			purged = append(purged, e)
		}
	}
	if len(purged) != 1 || purged[0].StoreKey != key || purged[0].Err != nil || purged[0].Method != "" || purged[0].Decision.String() != "purged" {
		t.Fatalf("purged events %+v, want one naming %s", purged, key)
	}

	// A key in flight is refused, and no event.
	done := make(chan error, 1)
	go func() {
		_, err := client.Do(withKey(t.Context(), "k-running"), &testingv1.DoRequest{Payload: "block"})
		done <- err
	}()
	r.Service.WaitExecutions(t, 3)
	running, _ := r.Idempotency.StoreKey(testingv1.TestService_Do_FullMethodName, "", "k-running")
	if _, err := r.Idempotency.Purge(t.Context(), running, store.PurgeOptions{}); !errors.Is(err, store.ErrInFlight) {
		t.Fatalf("Purge of a key in flight = %v, want ErrInFlight", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := r.Events.Count(idempotency.DecisionPurged); n != 1 {
		t.Fatalf("%d purged events, want 1", n)
	}

	fs := faultstore.New(memStore(t))
	srv := idempotency.NewServer(fs)
	if _, ok := srv.Inspector(); ok {
		t.Fatal("Inspector() of a fault store is ok")
	}
	if _, err := srv.Purge(t.Context(), key, store.PurgeOptions{}); err == nil || len(fs.Calls()) != 0 {
		t.Fatalf("Purge over a store that is not an Inspector = %v with store calls %v, want an error and none", err, fs.Calls())
	}
}
