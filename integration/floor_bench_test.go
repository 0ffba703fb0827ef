package idempotency_test

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// floorInterceptor is the least an idempotency interceptor can do on the
// paths BenchmarkUnary measures, and nothing more: read the key, run the
// handler and keep its serialized answer in a map under the key; a retry
// decodes the kept answer and marks it replayed. It has no fingerprint, no
// claim (two concurrent calls both run), no lease, no expiry, no size
// bound and no error handling, so it is not safe to use: its rows, beside
// bare, bound from below what any interceptor that replays stored answers
// byte for byte adds to a call.
func floorInterceptor() grpc.UnaryServerInterceptor {
	var answers sync.Map // key → serialized response
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		keys := md[idempotency.MetadataKey]
		if len(keys) != 1 {
			return handler(ctx, req)
		}
		if data, ok := answers.Load(keys[0]); ok {
			resp := &testingv1.DoResponse{}
			if err := proto.Unmarshal(data.([]byte), resp); err != nil {
				return nil, err
			}
			if err := grpc.SetHeader(ctx, metadata.Pairs(idempotency.ReplayedKey, "true")); err != nil {
				return nil, err
			}
			return resp, nil
		}
		resp, err := handler(ctx, req)
		if err != nil {
			return nil, err
		}
		data, err := proto.Marshal(resp.(proto.Message))
		if err != nil {
			return nil, err
		}
		answers.Store(keys[0], data)
		return resp, nil
	}
}
