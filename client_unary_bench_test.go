package idempotency_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// BenchmarkClientCall compares a bare call over bufconn with the same call
// through the key-only and the retrying client interceptor. The server runs
// no idempotency interceptor, so only the client's cost differs.
func BenchmarkClientCall(b *testing.B) {
	cases := []struct {
		name string
		opts []grpc.DialOption
	}{
		{name: "bare"},
		{name: "key only", opts: []grpc.DialOption{grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor(idempotency.WithoutRetry()))}},
		{name: "retrying", opts: []grpc.DialOption{grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor())}},
	}
	srv := testserver.New(b, &testserver.Service{})
	req := &testingv1.DoRequest{Payload: "p"}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			client := srv.Client(b, c.opts...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Do(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClientInterceptor measures the interceptor alone, with an
// invoker that does nothing.
func BenchmarkClientInterceptor(b *testing.B) {
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	cases := []struct {
		name, method string
		opts         []idempotency.ClientOption
	}{
		{name: "NO_SIDE_EFFECTS", method: testingv1.TestService_Read_FullMethodName},
		{name: "key only", method: testingv1.TestService_Do_FullMethodName, opts: []idempotency.ClientOption{idempotency.WithoutRetry()}},
		{name: "retrying", method: testingv1.TestService_Do_FullMethodName},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			intercept := idempotency.UnaryClientInterceptor(c.opts...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_ = intercept(ctx, c.method, nil, nil, nil, invoker)
			}
		})
	}
}
