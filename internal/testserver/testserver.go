// Package testserver starts the test service on an in-memory bufconn
// listener for tests and examples.
package testserver

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// HandlerFunc handles every unary method of the test service; method is the
// full method name, for example "/idempotency.testing.v1.TestService/Do".
type HandlerFunc func(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error)

// Service implements the test service. Each unary method calls Handler (or
// Echo when Handler is nil) and counts the execution.
type Service struct {
	testingv1.UnimplementedTestServiceServer

	// Handler answers every unary method.
	Handler HandlerFunc

	executions atomic.Int64
}

// Executions is how many times a unary handler ran.
func (s *Service) Executions() int64 { return s.executions.Load() }

// Echo answers with the request's payload and amount, numbers the execution,
// and sleeps for req.Sleep first when it is set.
func Echo(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	if d := req.GetSleep().AsDuration(); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount()}, nil
}

func (s *Service) handle(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	n := s.executions.Add(1)
	h := s.Handler
	if h == nil {
		h = Echo
	}
	resp, err := h(ctx, method, req)
	if resp != nil && resp.Execution == 0 {
		resp.Execution = n
	}
	return resp, err
}

// Do implements the unannotated method.
func (s *Service) Do(ctx context.Context, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	return s.handle(ctx, testingv1.TestService_Do_FullMethodName, req)
}

// Required implements the MODE_REQUIRED method.
func (s *Service) Required(ctx context.Context, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	return s.handle(ctx, testingv1.TestService_Required_FullMethodName, req)
}

// Disabled implements the MODE_DISABLED method.
func (s *Service) Disabled(ctx context.Context, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	return s.handle(ctx, testingv1.TestService_Disabled_FullMethodName, req)
}

// Read implements the NO_SIDE_EFFECTS method.
func (s *Service) Read(ctx context.Context, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	return s.handle(ctx, testingv1.TestService_Read_FullMethodName, req)
}

// Keyed implements the method whose key may come from request_id.
func (s *Service) Keyed(ctx context.Context, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	return s.handle(ctx, testingv1.TestService_Keyed_FullMethodName, req)
}

// Tuned implements the method with its own retention and lease.
func (s *Service) Tuned(ctx context.Context, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	return s.handle(ctx, testingv1.TestService_Tuned_FullMethodName, req)
}

// Stream echoes every request it receives.
func (s *Service) Stream(stream grpc.BidiStreamingServer[testingv1.DoRequest, testingv1.DoResponse]) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil //nolint:nilerr // io.EOF or a cancelled stream ends the echo.
		}
		if err := stream.Send(&testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount()}); err != nil {
			return err
		}
	}
}

// Server is a running test server.
type Server struct {
	// Service is the service behind the server.
	Service *Service
	// GRPC is the gRPC server.
	GRPC *grpc.Server

	listener *bufconn.Listener
	stopOnce sync.Once
}

// New starts svc on a bufconn listener with the given server options and
// stops it when the test ends.
func New(tb testing.TB, svc *Service, opts ...grpc.ServerOption) *Server {
	tb.Helper()
	return NewWith(tb, svc, nil, opts...)
}

// NewWith is [New] that lets register add more services to the gRPC server
// before it starts; register may be nil.
func NewWith(tb testing.TB, svc *Service, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) *Server {
	tb.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(opts...)
	testingv1.RegisterTestServiceServer(gs, svc)
	if register != nil {
		register(gs)
	}
	go func() { _ = gs.Serve(lis) }()
	s := &Server{Service: svc, GRPC: gs, listener: lis}
	tb.Cleanup(s.Stop)
	return s
}

// Stop stops the server at once; calls in progress fail with UNAVAILABLE.
func (s *Server) Stop() { s.stopOnce.Do(s.GRPC.Stop) }

// Dial connects a client to the server and closes it when the test ends.
func (s *Server) Dial(tb testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return s.listener.DialContext(ctx)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)
	cc, err := grpc.NewClient("passthrough:///bufconn", opts...)
	if err != nil {
		tb.Fatalf("testserver: dial: %v", err)
	}
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Client dials the server and returns a test service client.
func (s *Server) Client(tb testing.TB, opts ...grpc.DialOption) testingv1.TestServiceClient {
	tb.Helper()
	return testingv1.NewTestServiceClient(s.Dial(tb, opts...))
}
