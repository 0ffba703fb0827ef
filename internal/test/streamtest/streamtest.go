// Package streamtest serves the streaming services the stream tests call,
// with [testserver], behind the stream server interceptor: grpc-go's
// interop TestService over bufconn ([Start]) and the StreamService over
// loopback behind a fault proxy ([Proxied]), for the stream tests of the
// root package, the integration module and the PostgreSQL store: the same
// cases run over the memory store, Redis, PostgreSQL and MySQL.
package streamtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// Full names of the interop methods the tests call.
const (
	OutputMethod = testgrpc.TestService_StreamingOutputCall_FullMethodName
	InputMethod  = testgrpc.TestService_StreamingInputCall_FullMethodName
	DuplexMethod = testgrpc.TestService_FullDuplexCall_FullMethodName
)

// Policies makes the interop service's streaming methods (in proto package
// grpc.testing, which the interceptor otherwise leaves alone) take part,
// with mode and the rest of p.
func Policies(p idempotency.MethodPolicy) []idempotency.ServerOption {
	return []idempotency.ServerOption{idempotency.WithMethodPolicy(OutputMethod, p), idempotency.WithMethodPolicy(InputMethod, p)}
}

// Service implements the interop TestService's StreamingOutputCall and
// StreamingInputCall, counting executions and what they send.
//
// StreamingOutputCall sets the header x-execution to the execution's
// number, sends one message per response parameter, whose body of Size
// bytes starts with "e<execution> m<index>", sets the trailer x-sent, and
// ends with the request's response_status. StreamingInputCall answers with
// the total size of the payload bodies it received, with the header
// x-execution.
type Service struct {
	testgrpc.UnimplementedTestServiceServer

	// BeforeSend, when set, runs before StreamingOutputCall sends message
	// i (from 0); it may block.
	BeforeSend func(ctx context.Context, i int)

	executions atomic.Int64
	sent       atomic.Int64
}

// Executions is how many times a handler ran.
func (s *Service) Executions() int64 { return s.executions.Load() }

// Sent is how many messages StreamingOutputCall sent without an error.
func (s *Service) Sent() int64 { return s.sent.Load() }

// StreamingOutputCall implements the server-streaming method.
func (s *Service) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, stream grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	n := s.executions.Add(1)
	if err := stream.SetHeader(metadata.Pairs("x-execution", strconv.FormatInt(n, 10))); err != nil {
		return err
	}
	sent := 0
	for i, p := range req.GetResponseParameters() {
		if s.BeforeSend != nil {
			s.BeforeSend(stream.Context(), i)
		}
		body := make([]byte, max(int(p.GetSize()), 16))
		copy(body, fmt.Sprintf("e%d m%d ", n, i))
		if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: body}}); err != nil {
			return err
		}
		sent++
		s.sent.Add(1)
	}
	stream.SetTrailer(metadata.Pairs("x-sent", strconv.Itoa(sent)))
	if st := req.GetResponseStatus(); st.GetCode() != 0 {
		return status.Error(codes.Code(st.GetCode()), st.GetMessage())
	}
	return nil
}

// StreamingInputCall implements the client-streaming method.
func (s *Service) StreamingInputCall(stream grpc.ClientStreamingServer[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]) error {
	n := s.executions.Add(1)
	if err := stream.SetHeader(metadata.Pairs("x-execution", strconv.FormatInt(n, 10))); err != nil {
		return err
	}
	total := 0
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
		}
		if err != nil {
			return err
		}
		total += len(req.GetPayload().GetBody())
	}
}

// Start serves svc (a [Service], or another implementation) with
// [testserver.Start] behind s's stream and unary interceptors (none when
// s is nil), with the server options sopts, and returns a client of it;
// both stop when the test ends.
func Start(tb testing.TB, svc testgrpc.TestServiceServer, s *idempotency.Server, sopts ...grpc.ServerOption) testgrpc.TestServiceClient {
	tb.Helper()
	srv := testserver.Start(tb, func(r grpc.ServiceRegistrar) { testgrpc.RegisterTestServiceServer(r, svc) },
		append(interceptors(s), sopts...)...)
	return testgrpc.NewTestServiceClient(srv.Dial(tb))
}

// interceptors returns the server options that put s's stream and unary
// interceptors on a server, or none when s is nil.
func interceptors(s *idempotency.Server) []grpc.ServerOption {
	if s == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StreamInterceptor(s.StreamServerInterceptor()), grpc.UnaryInterceptor(s.UnaryServerInterceptor())}
}

// OutputRequest asks StreamingOutputCall for n messages of size bytes.
func OutputRequest(n, size int) *testgrpc.StreamingOutputCallRequest {
	req := &testgrpc.StreamingOutputCallRequest{}
	for range n {
		req.ResponseParameters = append(req.ResponseParameters, &testgrpc.ResponseParameters{Size: int32(size)})
	}
	return req
}

// Answer is what a server-streaming call got: each message's encoding,
// the header, the trailer and the final status.
type Answer struct {
	Messages         [][]byte
	Header, Trailer  metadata.MD
	Err              error
	Replayed         bool
	ExecutionHeaders []string
}

// Output calls StreamingOutputCall with req and reads its whole answer.
func Output(ctx context.Context, c testgrpc.TestServiceClient, req *testgrpc.StreamingOutputCallRequest) Answer {
	var a Answer
	stream, err := c.StreamingOutputCall(ctx, req)
	if err != nil {
		a.Err = err
		return a
	}
	for {
		m, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				a.Err = err
			}
			break
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			panic(err)
		}
		a.Messages = append(a.Messages, b)
	}
	a.Header, _ = stream.Header()
	a.Trailer = stream.Trailer()
	a.Replayed = idempotency.Replayed(a.Header, a.Trailer)
	a.ExecutionHeaders = a.Header.Get("x-execution")
	return a
}

// Input calls StreamingInputCall with one message per body and returns
// the response, its header and the error.
func Input(ctx context.Context, c testgrpc.TestServiceClient, bodies ...[]byte) (*testgrpc.StreamingInputCallResponse, metadata.MD, error) {
	stream, err := c.StreamingInputCall(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, b := range bodies {
		if err := stream.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: b}}); err != nil {
			break // the server answered early; CloseAndRecv says how
		}
	}
	resp, err := stream.CloseAndRecv()
	header, _ := stream.Header()
	return resp, header, err
}
