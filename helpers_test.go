package idempotency_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
)

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
	newFixture      = testkit.NewFixture
	newFixtureOn    = testkit.NewFixtureOn
	wantOneKey      = testkit.WantOneKey
)

// fixture is the test service behind the idempotency interceptors (unary
// and stream) over a memory store wrapped in a fault store, with a client
// dialed to it and a recorder of attempts: [testkit.Fixture].
type fixture = testkit.Fixture

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

// TestMain checks for leaked goroutines.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
