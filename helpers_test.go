package idempotency_test

import (
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testkit"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
	"github.com/grpc-idempotency/idempotency/internal/wait"
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

// The rig shared by every module's tests lives in internal/testkit, and
// waiting in internal/wait.
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
