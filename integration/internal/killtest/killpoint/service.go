package killpoint

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Method is the full name of the service's one method, Charge: its request
// is the call's key, its response the process ID, in decimal, of the
// process whose handler ran for that key.
const Method = "/" + serviceName + "/Charge"

const serviceName = "killtest.v1.Kill"

// ChargeFunc handles Charge.
type ChargeFunc func(ctx context.Context, req *wrapperspb.StringValue) (*wrapperspb.StringValue, error)

// Register registers the service on s, its Charge handled by f. The
// messages are well-known types, so the idempotency server finds the
// response type to replay without generated code of the service's own.
func Register(s grpc.ServiceRegistrar, f ChargeFunc) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: serviceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Charge",
			Handler: func(_ any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
				req := new(wrapperspb.StringValue)
				if err := dec(req); err != nil {
					return nil, err
				}
				if in == nil {
					return f(ctx, req)
				}
				info := &grpc.UnaryServerInfo{Server: nil, FullMethod: Method}
				return in(ctx, req, info, func(ctx context.Context, req any) (any, error) {
					return f(ctx, req.(*wrapperspb.StringValue))
				})
			},
		}},
	}, nil)
}
