// Package testserver is the one way tests start a gRPC server: [Start]
// serves the services a test registers on an in-memory bufconn listener,
// [StartLoopback] on a TCP port of 127.0.0.1 (for a fault proxy between
// client and server), each with the test's server options (interceptors,
// stats handlers), stopped when the test ends; [Server.Dial] connects a
// client to either. [New] serves [Service], the test service every
// package's tests call, which counts its executions and lets a test wait
// for them.
package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
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
	started    wait.Signal
}

// Executions is how many times a unary handler ran.
func (s *Service) Executions() int64 { return s.executions.Load() }

// WaitExecutions waits until a unary handler has started n times in all,
// and fails the test if that does not happen within [wait.Timeout].
func (s *Service) WaitExecutions(tb testing.TB, n int64) {
	tb.Helper()
	s.started.Until(tb, fmt.Sprintf("%d executions", n), func() bool { return s.Executions() >= n })
}

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
	s.started.Notify()
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

// Stream echoes every request it receives. It returns nil when the client
// closes its side (io.EOF) or the stream is cancelled or times out (the
// client cancelled, its deadline passed, the connection closed), and the
// receive error otherwise (a message over the server's limit, one that does
// not decode), so that a stream interceptor sees the failure. (grpc-go has
// already sent that error's status to the client and ended the stream's
// context by the time Recv returns it.)
func (s *Service) Stream(stream grpc.BidiStreamingServer[testingv1.DoRequest, testingv1.DoResponse]) error {
	for {
		req, err := stream.Recv()
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
			status.Code(err) == codes.Canceled, status.Code(err) == codes.DeadlineExceeded:
			return nil // a cancelled or timed-out stream ends the echo.
		default:
			return err
		}
		if err := stream.Send(&testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount()}); err != nil {
			return err
		}
	}
}

// Server is a running test server.
type Server struct {
	// Service is the test service behind the server, when it was started
	// by [New] or [NewWith]; nil when started by [Start].
	Service *Service
	// GRPC is the gRPC server.
	GRPC *grpc.Server

	addr     string                                          // host:port, or "bufconn"
	dialer   func(context.Context, string) (net.Conn, error) // bufconn's; nil over TCP
	stopOnce sync.Once
}

// Start builds a gRPC server with opts, lets register add its services,
// and serves it on a bufconn listener until the test ends.
func Start(tb testing.TB, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) *Server {
	tb.Helper()
	lis := bufconn.Listen(1 << 20)
	s := serve(tb, lis, register, opts)
	s.addr = "bufconn"
	s.dialer = func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }
	return s
}

// StartLoopback is [Start] on a TCP port of 127.0.0.1: a real network
// connection, which a fault proxy can sit in and cut ([Server.Addr]).
func StartLoopback(tb testing.TB, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) *Server {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testserver: listen: %v", err)
	}
	s := serve(tb, lis, register, opts)
	s.addr = lis.Addr().String()
	return s
}

func serve(tb testing.TB, lis net.Listener, register func(grpc.ServiceRegistrar), opts []grpc.ServerOption) *Server {
	gs := grpc.NewServer(opts...)
	if register != nil {
		register(gs)
	}
	go func() { _ = gs.Serve(lis) }()
	s := &Server{GRPC: gs}
	tb.Cleanup(s.Stop)
	return s
}

// New serves svc on a bufconn listener with the given server options
// until the test ends.
func New(tb testing.TB, svc *Service, opts ...grpc.ServerOption) *Server {
	tb.Helper()
	return NewWith(tb, svc, nil, opts...)
}

// NewWith is [New] that lets register add more services to the gRPC server
// before it starts; register may be nil.
func NewWith(tb testing.TB, svc *Service, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) *Server {
	tb.Helper()
	s := Start(tb, func(r grpc.ServiceRegistrar) {
		testingv1.RegisterTestServiceServer(r, svc)
		if register != nil {
			register(r)
		}
	}, opts...)
	s.Service = svc
	return s
}

// Stop stops the server at once; calls in progress fail with UNAVAILABLE.
func (s *Server) Stop() { s.stopOnce.Do(s.GRPC.Stop) }

// Addr is the server's host:port when it listens on loopback, "bufconn"
// otherwise.
func (s *Server) Addr() string { return s.addr }

// Dial connects a client to the server and closes it when the test ends.
func (s *Server) Dial(tb testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	if s.dialer != nil {
		opts = append([]grpc.DialOption{grpc.WithContextDialer(s.dialer)}, opts...)
	}
	return Dial(tb, "passthrough:///"+s.addr, opts...)
}

// Dial connects a client without TLS to target (for example
// "passthrough:///" and the address of a fault proxy in front of a
// server) and closes it when the test ends.
func Dial(tb testing.TB, target string, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient(target, opts...)
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
