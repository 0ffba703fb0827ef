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
// ([Replayed]). For a unary call, that is read from the header and trailer
// of its last attempt: after retries, that is the answer the caller got.
// For a client- or server-streaming call, it is [Replayed] of the stream's
// Header and Trailer as the caller sees them (the header of the first
// attempt that received one, the trailer of the last): set once the
// header has come with the first message received, and again when the call
// ends. So a server stream resumed after a live first attempt is not
// replayed, although the rest of its messages came from the store: its
// header, and the handler run that sent it, are the caller's own; unless it
// ends in an error replayed from the store, whose trailer is marked. A
// call that fails before any attempt, and a stream the interceptor passes
// through (bidirectional, or without a key), leave it false. Only the
// interceptors read it: on a connection without them, gRPC ignores the
// option and *replayed stays as it was; such clients call [Replayed] with
// grpc.Header and grpc.Trailer, or a stream's Header and Trailer.
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
