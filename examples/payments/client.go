package main

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// dial connects to addr as the holder of token, with the given client
// interceptors, outermost first, and one more innermost that counts each
// attempt that goes on the wire in m. With tel (-otel), the call-span
// interceptor goes before them all and otelgrpc traces each attempt.
func dial(addr, token string, m *meter, tel *telemetry, chain ...grpc.UnaryClientInterceptor) (*grpc.ClientConn, error) {
	chain = append(chain, countAttempts(m))
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearerToken(token)),
	}
	if tel != nil {
		opts = append(opts, tel.dialOptions()...)
	}
	return grpc.NewClient(addr, append(opts, grpc.WithChainUnaryInterceptor(chain...))...)
}

// countAttempts counts every attempt that reaches it, so placed below a
// retrying interceptor it sees each retry.
func countAttempts(m *meter) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		m.attempted(method)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}
