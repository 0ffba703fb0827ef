package idempotency_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
	"github.com/grpc-idempotency/idempotency/store"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fixture is the test service behind the idempotency interceptors (unary
// and stream) over a memory store wrapped in a fault store: [testkit.Serve]
// with the names this package's tests use.
type fixture struct {
	srv    *testserver.Server
	client testingv1.TestServiceClient
	store  *faultstore.Store
	events *events
	server *idempotency.Server
}

func newFixture(t *testing.T, h testserver.HandlerFunc, opts ...idempotency.ServerOption) *fixture {
	t.Helper()
	return newFixtureOn(t, faultstore.New(memStore(t)), h, opts...)
}

// newFixtureOn is newFixture over fs, which several fixtures may share as
// the replicas of one service share a store.
func newFixtureOn(t *testing.T, fs *faultstore.Store, h testserver.HandlerFunc, opts ...idempotency.ServerOption) *fixture {
	t.Helper()
	r := testkit.Serve(t, testkit.Config{Handler: h, Store: fs, Options: opts})
	return &fixture{srv: r.Server, client: r.Client(t), store: fs, events: r.Events, server: r.Idempotency}
}

// The rig shared by every module's tests lives in internal/test/testkit, and
// waiting in internal/test/wait.
var (
	memStore        = testkit.NewMemoryStore
	withKey         = testkit.WithKey
	errorInfo       = testkit.ErrorInfo
	wantReason      = testkit.WantReason
	clientReason    = testkit.ClientReason
	waitFor         = wait.For
	newDirectServer = testkit.NewDirectServer
)

// events is the recorder of observer events, [testkit.Events].
type events = testkit.Events

// statusError returns a status error with a detail, for stored-error tests.
func statusError(c codes.Code, msg string) error {
	st, err := status.New(c, msg).WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "amount", Description: "too big"}},
	})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

type protoMessage = proto.Message

// The defaults and bounds the options' doc comments state, which the
// package does not export.
const (
	defaultMaxAttempts          = 5       // WithMaxAttempts
	defaultMaxStreamRetryBuffer = 1 << 20 // WithMaxStreamRetryBuffer
	defaultLease                = 60 * time.Second
	minLease                    = 100 * time.Millisecond
	maxLease                    = 24 * time.Hour
	defaultRetention            = 24 * time.Hour
	maxRetention                = 87600 * time.Hour
	defaultHandlerTimeout       = time.Minute
)

// clientRig is the test service behind the real server interceptor over a
// memory store ([testkit.Serve]). Outside it sit a recorder of every
// attempt and an optional fault layer: recorder → fault → idempotency →
// handler.
type clientRig struct {
	srv      *testserver.Server
	attempts *attemptLog
}

// rigConfig configures newClientRig.
type rigConfig struct {
	handler  testserver.HandlerFunc
	fault    grpc.UnaryServerInterceptor
	server   []idempotency.ServerOption
	store    store.Store                 // default: a fresh memory store
	register func(grpc.ServiceRegistrar) // more services on the server, or nil
}

func newClientRig(t *testing.T, cfg rigConfig) *clientRig {
	t.Helper()
	mem := cfg.store
	if mem == nil {
		mem = memStore(t)
	}
	log := &attemptLog{}
	outer := []grpc.UnaryServerInterceptor{log.record}
	if cfg.fault != nil {
		outer = append(outer, cfg.fault)
	}
	r := testkit.Serve(t, testkit.Config{Handler: cfg.handler, Store: mem, Options: cfg.server, Outer: outer, Register: cfg.register})
	return &clientRig{srv: r.Server, attempts: log}
}

// client dials the rig with the client interceptors given, chained in that
// order.
func (r *clientRig) client(t *testing.T, interceptors ...grpc.UnaryClientInterceptor) testingv1.TestServiceClient {
	t.Helper()
	return r.srv.Client(t, grpc.WithChainUnaryInterceptor(interceptors...))
}

// executions is how many times the handler ran.
func (r *clientRig) executions() int64 { return r.srv.Service.Executions() }

// attempt is one call as the server saw it, before the idempotency
// interceptor.
type attempt struct {
	method string
	keys   []string    // values of the idempotency-key metadata
	md     metadata.MD // all of the request metadata
	at     time.Time
}

// attemptLog records every attempt the server sees.
type attemptLog struct {
	mu   sync.Mutex
	list []attempt
}

func (l *attemptLog) record(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	a := attempt{method: info.FullMethod, keys: md.Get(idempotency.MetadataKey), md: md, at: time.Now()}
	l.mu.Lock()
	l.list = append(l.list, a)
	l.mu.Unlock()
	return handler(ctx, req)
}

func (l *attemptLog) all() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]attempt(nil), l.list...)
}

// wantOneKey fails the test unless every attempt carried exactly one key,
// the same one, and returns it.
func wantOneKey(t *testing.T, attempts []attempt) string {
	t.Helper()
	if len(attempts) == 0 {
		t.Fatal("the server saw no attempt")
	}
	for i, a := range attempts {
		if len(a.keys) != 1 || a.keys[0] != attempts[0].keys[0] {
			t.Fatalf("attempt %d carried keys %q, attempt 1 carried %q", i+1, a.keys, attempts[0].keys)
		}
	}
	return attempts[0].keys[0]
}

// loseResponses lets the handler (and the idempotency interceptor) run and
// then replaces the result of the first n attempts with UNAVAILABLE, as if
// the response were lost on the way back.
func loseResponses(n int64) grpc.UnaryServerInterceptor {
	var seen atomic.Int64
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if seen.Add(1) <= n {
			return nil, status.Error(codes.Unavailable, "response lost")
		}
		return resp, err
	}
}

// errorWith returns a status error with an ErrorInfo detail, and a
// RetryInfo when retryAfter is positive.
func errorWith(c codes.Code, domain, reason string, retryAfter time.Duration) error {
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Domain: domain, Reason: reason}}
	if retryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
	}
	st, err := status.New(c, "test error").WithDetails(details...)
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// methodOf returns the client's method by short name; "" is Do.
func methodOf(c testingv1.TestServiceClient, name string) func(context.Context, *testingv1.DoRequest, ...grpc.CallOption) (*testingv1.DoResponse, error) {
	switch name {
	case "", "Do":
		return c.Do
	case "Required":
		return c.Required
	case "Disabled":
		return c.Disabled
	case "Read":
		return c.Read
	case "Keyed":
		return c.Keyed
	case "Tuned":
		return c.Tuned
	}
	panic("unknown method " + name)
}

// noBackoff retries at once unless the server asks for a wait.
func noBackoff(context.Context, uint) time.Duration { return 0 }
