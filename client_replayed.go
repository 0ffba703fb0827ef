package idempotency

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Replayed reports whether a call's answer came from the server's store
// rather than from its handler: whether the header or the trailer carries
// the replay marker ([ReplayedKey]: "true"). A replayed success carries it
// in the header, a replayed error in the trailer; pass both, as filled by
// grpc.Header and grpc.Trailer, or use [ReplayedInto] with
// [UnaryClientInterceptor].
func Replayed(header, trailer metadata.MD) bool {
	return slices.Contains(header.Get(ReplayedKey), "true") || slices.Contains(trailer.Get(ReplayedKey), "true")
}

// ReplayedInto makes [UnaryClientInterceptor] and [StreamClientInterceptor]
// set *replayed to whether the answer the caller got was replayed
// ([Replayed]): for a unary call, of its last attempt; for a stream, of
// its Header and Trailer as the caller sees them. It stays false for a
// call that fails before any attempt and for a stream passed through.
// Without the interceptors gRPC ignores it. The rest is in
// [the client guide].
//
// [the client guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/client.md#was-it-replayed
func ReplayedInto(replayed *bool) grpc.CallOption {
	return replayedCallOption{dst: replayed}
}

// replayedCallOption carries the destination of [ReplayedInto] to the
// interceptor; gRPC itself ignores it.
type replayedCallOption struct {
	grpc.EmptyCallOption
	dst *bool
}

// replayedDst returns the destination of the last [ReplayedInto] in opts,
// set to false, or nil when there is none.
func replayedDst(opts []grpc.CallOption) *bool {
	var dst *bool
	for _, o := range opts {
		if r, ok := o.(replayedCallOption); ok && r.dst != nil {
			dst = r.dst
		}
	}
	if dst != nil {
		*dst = false
	}
	return dst
}

// reportReplayed returns invoker, or when opts hold [ReplayedInto], an
// invoker that sets its destination after each attempt from that
// attempt's header and trailer, so the last attempt's answer counts.
func reportReplayed(invoker grpc.UnaryInvoker, opts []grpc.CallOption) grpc.UnaryInvoker {
	dst := replayedDst(opts)
	if dst == nil {
		return invoker
	}
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		var header, trailer metadata.MD
		opts = append(opts[:len(opts):len(opts)], grpc.Header(&header), grpc.Trailer(&trailer))
		err := invoker(ctx, method, req, reply, cc, opts...)
		*dst = Replayed(header, trailer)
		return err
	}
}
