package idempotency_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/redistest"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// fixture is a bufconn server with the idempotency interceptor over a
// memory store wrapped in a fault store.
type fixture struct {
	srv    *testserver.Server
	client testingv1.TestServiceClient
	store  *faultstore.Store
	events *events
}

func newFixture(t *testing.T, h testserver.HandlerFunc, opts ...idempotency.Option) *fixture {
	t.Helper()
	mem := memorystore.New()
	t.Cleanup(func() { _ = mem.Close() })
	fs := faultstore.New(mem)
	ev := &events{}
	opts = append([]idempotency.Option{idempotency.WithObserver(ev)}, opts...)
	srv := testserver.New(t, &testserver.Service{Handler: h},
		grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(fs, opts...)))
	return &fixture{srv: srv, client: srv.Client(t), store: fs, events: ev}
}

func withKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, key)
}

// events records observer events.
type events struct {
	mu sync.Mutex
	ev []idempotency.Event
}

func (e *events) Observe(_ context.Context, ev idempotency.Event) {
	e.mu.Lock()
	e.ev = append(e.ev, ev)
	e.mu.Unlock()
}

// all returns the events so far, in order.
func (e *events) all() []idempotency.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ev)
}

func (e *events) count(o idempotency.Outcome) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.ev {
		if ev.Outcome == o {
			n++
		}
	}
	return n
}

// errorInfo returns the ErrorInfo and RetryInfo details of err.
func errorInfo(err error) (*errdetails.ErrorInfo, *errdetails.RetryInfo) {
	var ei *errdetails.ErrorInfo
	var ri *errdetails.RetryInfo
	for _, d := range status.Convert(err).Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			ei = d
		case *errdetails.RetryInfo:
			ri = d
		}
	}
	return ei, ri
}

// wantReason fails the test unless err has code and the ErrorInfo reason.
func wantReason(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("code = %v (%v), want %v", got, err, code)
	}
	ei, _ := errorInfo(err)
	if ei == nil || ei.GetReason() != reason || ei.GetDomain() != idempotency.ErrorDomain {
		t.Fatalf("ErrorInfo = %v, want reason %s in domain %s", ei, reason, idempotency.ErrorDomain)
	}
}

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

// waitFor polls cond until it holds or the test's deadline nears.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

type protoMessage = proto.Message

// storeBackends returns a constructor per real store: the memory store, and
// the Redis store on a redis-server of its own.
func storeBackends() map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"memory": func(t *testing.T) store.Store {
			mem := memorystore.New()
			t.Cleanup(func() { _ = mem.Close() })
			return mem
		},
		"redis": func(t *testing.T) store.Store { return redisstore.New(redistest.StartServer(t).Client()) },
	}
}
