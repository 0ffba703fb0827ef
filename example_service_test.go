package idempotency_test

// This file stands in for your own service: for the code protoc-gen-go-grpc
// generates from your .proto file, and for your implementation of it. It is
// written by hand over well-known types (wrapperspb), so that the examples
// of this package need nothing but this module, gRPC and protobuf: copy
// this file and any example_*_test.go file into an empty module, run
// `go mod init example.com/try && go mod tidy && go test`, and they run.
//
// In your code, use your generated RegisterXxxServer and NewXxxClient
// instead. The method stands for
//
//	service PaymentsService {
//	  rpc Charge(google.protobuf.Int64Value) returns (google.protobuf.StringValue);
//	}
//
// in package shop.v1. A hand-written service has no descriptor in the
// registry, so it has no idempotency.v1.method option: it is MODE_OPTIONAL,
// the default, and calls that carry a key are deduplicated.

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// chargeMethod is the full method name of shop.v1.PaymentsService/Charge.
const chargeMethod = "/shop.v1.PaymentsService/Charge"

// paymentsServer is the service's implementation: Charge charges an amount
// in cents and answers with a new charge id, "ch_1", "ch_2", ... It would
// charge again on every call that reaches it, as a real payment service
// does; the idempotency interceptor is what makes retries safe.
type paymentsServer struct {
	charges atomic.Int64
}

// Charge charges req.Value cents. It refuses an amount that is not
// positive with INVALID_ARGUMENT, an error the interceptor stores.
func (s *paymentsServer) Charge(_ context.Context, req *wrapperspb.Int64Value) (*wrapperspb.StringValue, error) {
	if req.GetValue() <= 0 {
		return nil, status.Error(codes.InvalidArgument, "the amount must be positive")
	}
	return wrapperspb.String("ch_" + strconv.FormatInt(s.charges.Add(1), 10)), nil
}

// paymentsServiceServer stands in for the generated interface
// shopv1.PaymentsServiceServer.
type paymentsServiceServer interface {
	Charge(context.Context, *wrapperspb.Int64Value) (*wrapperspb.StringValue, error)
}

// registerPaymentsServer stands in for the generated
// shopv1.RegisterPaymentsServiceServer.
func registerPaymentsServer(srv *grpc.Server, s paymentsServiceServer) {
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "shop.v1.PaymentsService",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "Charge", Handler: chargeHandler}},
	}, s)
}

// chargeHandler is what protoc-gen-go-grpc generates for each unary method:
// it decodes the request and runs the handler through the interceptors.
func chargeHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	req := new(wrapperspb.Int64Value)
	if err := dec(req); err != nil {
		return nil, err
	}
	charge := func(ctx context.Context, req any) (any, error) {
		return srv.(paymentsServiceServer).Charge(ctx, req.(*wrapperspb.Int64Value))
	}
	if interceptor == nil {
		return charge(ctx, req)
	}
	return interceptor(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: chargeMethod}, charge)
}

// charge stands in for the generated client method
// shopv1.PaymentsServiceClient.Charge.
func charge(ctx context.Context, conn grpc.ClientConnInterface, cents int64, opts ...grpc.CallOption) (*wrapperspb.StringValue, error) {
	resp := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, chargeMethod, wrapperspb.Int64(cents), resp, opts...); err != nil {
		return nil, err
	}
	return resp, nil
}

// serveInMemory serves srv on an in-memory listener (bufconn), so that the
// examples need no network, and returns the dial option that reaches it
// (target "passthrough:///bufconn"). In your code: net.Listen and a real
// target.
func serveInMemory(srv *grpc.Server) grpc.DialOption {
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	return grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	})
}
