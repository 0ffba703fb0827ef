package idempotency_test

import (
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testkit"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// fixture is a bufconn server with the idempotency interceptors (unary and
// stream) over a memory store wrapped in a fault store.
type fixture struct {
	srv    *testserver.Server
	client testingv1.TestServiceClient
	store  *faultstore.Store
	events *events
	server *idempotency.Server
}

func newFixture(t *testing.T, h testserver.HandlerFunc, opts ...idempotency.ServerOption) *fixture {
	t.Helper()
	return newFixtureOn(t, faultstore.New(newMemStore(t)), h, opts...)
}

// newFixtureOn is newFixture over fs, which several fixtures may share as
// the replicas of one service share a store.
func newFixtureOn(t *testing.T, fs *faultstore.Store, h testserver.HandlerFunc, opts ...idempotency.ServerOption) *fixture {
	t.Helper()
	ev := &events{}
	opts = append([]idempotency.ServerOption{idempotency.WithObserver(ev)}, opts...)
	s := idempotency.NewServer(fs, opts...)
	srv := testserver.New(t, &testserver.Service{Handler: h},
		grpc.ChainUnaryInterceptor(s.UnaryServerInterceptor()), grpc.ChainStreamInterceptor(s.StreamServerInterceptor()))
	return &fixture{srv: srv, client: srv.Client(t), store: fs, events: ev, server: s}
}

// newMemStore returns a memory store closed when the test ends.
func newMemStore(t testing.TB) *memorystore.Store {
	t.Helper()
	mem := memorystore.New()
	t.Cleanup(func() { _ = mem.Close() })
	return mem
}

// The helpers the integration module's tests share live in internal/testkit.
var (
	withKey         = testkit.WithKey
	errorInfo       = testkit.ErrorInfo
	wantReason      = testkit.WantReason
	clientReason    = testkit.ClientReason
	waitFor         = testkit.WaitFor
	newDirectServer = testkit.NewDirectServer
)

// events records observer events; count is [testkit.Events.Count].
type events struct{ testkit.Events }

func (e *events) count(o idempotency.Decision) int { return e.Count(o) }

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
