package connectidempotency

import (
	"context"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
)

// NewInterceptor returns the handler interceptor that runs each keyed call
// of a unary, client-streaming or server-streaming procedure once per key
// and replays its stored outcome to every retry, over s: its store,
// options and method policies, as s's gRPC interceptors do, and through
// them (see the package documentation). Install it with
// connect.WithInterceptors on the handlers, outermost but for the layers
// that authenticate the caller (the scope, [idempotency.WithScope], reads
// what they put in the context). On a client it does nothing: clients use
// [NewClientInterceptor]. It panics when s is nil.
func NewInterceptor(s *idempotency.Server) connect.Interceptor {
	if s == nil {
		panic("connectidempotency: NewInterceptor: the server must not be nil")
	}
	return &interceptor{unary: s.UnaryServerInterceptor(), stream: s.StreamServerInterceptor()}
}

type interceptor struct {
	unary  grpc.UnaryServerInterceptor
	stream grpc.StreamServerInterceptor
}

// WrapUnary runs a unary call through the unary server interceptor.
func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		spec := req.Spec()
		if spec.IsClient {
			return next(ctx, req)
		}
		msg, isProto := req.Any().(proto.Message)
		if !isProto || spec.IdempotencyLevel == connect.IdempotencyNoSideEffects {
			return passUnary(ctx, req, next)
		}
		c := &unaryCall{next: next, req: req}
		c.tr.method = spec.Procedure
		ctx = c.tr.install(ctx, req.Header(), req.Peer().Protocol)
		out, err := i.unary(ctx, msg, &grpc.UnaryServerInfo{FullMethod: spec.Procedure}, c.handle)
		return c.answer(ctx, out, err)
	}
}

// WrapStreamingClient leaves a client's streams alone.
func (*interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler runs a streaming call through the stream server
// interceptor.
func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		spec := conn.Spec()
		if spec.IsClient {
			return next(ctx, conn)
		}
		if spec.IdempotencyLevel == connect.IdempotencyNoSideEffects {
			return passStream(ctx, conn, next)
		}
		s := newServerStream(ctx, conn)
		info := &grpc.StreamServerInfo{
			FullMethod:     spec.Procedure,
			IsClientStream: spec.StreamType&connect.StreamTypeClient != 0,
			IsServerStream: spec.StreamType&connect.StreamTypeServer != 0,
		}
		return s.answer(i.stream(nil, s, info, s.handler(next)))
	}
}
