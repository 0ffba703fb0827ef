package connectidempotency

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
)

// NewClientInterceptor returns the client interceptor that gives each
// call of a unary, client-streaming or server-streaming procedure one
// idempotency key and retries it with that key when a retry is safe, with
// the options of the gRPC client interceptors (opts: [idempotency.WithMaxAttempts],
// [idempotency.WithBackoff] and the others), through them (see the package
// documentation). The key is the one the call's context carries
// ([idempotency.ContextWithKey]) or the request's header (the
// [idempotency.MetadataKey] name, or the client's
// [idempotency.WithMetadataKey]), else the request's key_field, else a
// fresh one. A cut server stream resumes after the messages the caller
// received; a client stream is resent from the copies held. Calls of
// NO_SIDE_EFFECTS procedures, bidirectional streams and methods that get no
// key pass through. Install it with connect.WithInterceptors on the
// client. On a handler it does nothing. It panics on a configuration
// error, as the gRPC interceptors do.
func NewClientInterceptor(opts ...idempotency.ClientOption) connect.Interceptor {
	return &clientInterceptor{
		unary:  idempotency.UnaryClientInterceptor(opts...),
		stream: idempotency.StreamClientInterceptor(opts...),
	}
}

type clientInterceptor struct {
	unary  grpc.UnaryClientInterceptor
	stream grpc.StreamClientInterceptor
}

// WrapStreamingHandler leaves a handler's streams alone.
func (*clientInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// WrapUnary runs a unary call through the unary client interceptor.
func (c *clientInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		spec := req.Spec()
		msg, isProto := req.Any().(proto.Message)
		if !spec.IsClient || !isProto || spec.IdempotencyLevel == connect.IdempotencyNoSideEffects {
			return next(ctx, req)
		}
		call := &clientCall{next: next, req: req}
		err := c.unary(outgoing(ctx, req.Header()), spec.Procedure, msg, nil, nil, call.invoke)
		return call.answer(err)
	}
}

// clientCall is a unary connect-go call on its way through the unary
// client interceptor, which makes its attempts with invoke.
type clientCall struct {
	next connect.UnaryFunc
	req  connect.AnyRequest
	// The last attempt's answer, and its error as the interceptor saw it.
	resp      connect.AnyResponse
	err       error
	attempted error
}

// invoke is the grpc.UnaryInvoker the interceptor calls for each attempt:
// it sends the request with the call's outgoing metadata (its key) in its
// header, and fills in the header and trailer options the interceptor
// reads (the pushback trailer, the replay marker).
func (c *clientCall) invoke(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
	setOutgoing(c.req.Header(), ctx)
	resp, err := c.next(ctx, c.req)
	c.resp, c.err, c.attempted = resp, err, nil
	var header, trailer http.Header
	var ce *connect.Error
	switch {
	case errors.As(err, &ce):
		header, trailer = ce.Meta(), ce.Meta() // the error's metadata holds both
	case err == nil:
		header, trailer = resp.Header(), resp.Trailer()
	}
	fill(opts, header, trailer)
	if err != nil {
		c.attempted = clientStatus(ctx, err)
		return c.attempted
	}
	return nil
}

// answer returns the call's answer as connect-go's: the last attempt's,
// as it came, or the interceptor's own refusal (a key it refused, a wait
// cut short) as a *connect.Error. An error that carries the library's
// ErrorInfo also unwraps to its sentinel.
func (c *clientCall) answer(err error) (connect.AnyResponse, error) {
	if err == nil {
		return c.resp, nil
	}
	if c.attempted != nil && errors.Is(err, c.attempted) {
		return nil, withCause(c.err, err)
	}
	return nil, fromStatus(err)
}

// outgoing returns ctx with h, the request's header, in its outgoing
// metadata, after what ctx carries there (a key [idempotency.ContextWithKey]
// put there): the interceptor finds a key the caller set in either, and
// two different keys are refused. Values ctx already carries under a name
// are not added again.
func outgoing(ctx context.Context, h http.Header) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx) // a copy
	if md == nil {
		md = make(metadata.MD, len(h))
	}
	for k, v := range incomingMD(h) {
		if !slices.Equal(md[k], v) {
			md[k] = append(md[k], v...)
		}
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// setOutgoing sets in h the outgoing metadata of ctx, which holds the
// request's own header and what the interceptor added (the key, the resume
// point).
func setOutgoing(h http.Header, ctx context.Context) {
	md, _ := metadata.FromOutgoingContext(ctx)
	for k, vs := range md {
		if isProtocolHeader(k) {
			continue
		}
		h.Del(k)
		addMD(h, metadata.MD{k: vs})
	}
}

// fill sets the destinations of the grpc.Header and grpc.Trailer options
// of an attempt to its header and trailer.
func fill(opts []grpc.CallOption, header, trailer http.Header) {
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = clientMD(metadata.MD{}, header)
		case grpc.TrailerCallOption:
			*o.TrailerAddr = clientMD(metadata.MD{}, trailer)
		}
	}
}

// clientStatus is the error of an attempt, made on ctx, as the client
// interceptor reads it to decide on a retry: the status of its
// *connect.Error, except that a failure of the connection, which
// connect-go reports in its own words without an answer from the server,
// is UNAVAILABLE, as grpc-go reports it ([connectionFailed]). An error
// that is not a *connect.Error (another interceptor's) is not a status,
// and is never retried.
func clientStatus(ctx context.Context, err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	if ctx.Err() == nil && !connect.IsWireError(err) && connectionFailed(ce, err) {
		return &statusError{err: err, st: status.New(codes.Unavailable, ce.Message())}
	}
	return asStatus(err)
}

// connectionFailed reports whether err, of code ce.Code(), not sent by
// the server, on an attempt whose context is live, is a failure of the
// connection: connect-go reports a write or read that failed as UNKNOWN,
// a connection reset as CANCELED, a dial that timed out as
// DEADLINE_EXCEEDED, and a stream cut mid-message as INTERNAL wrapping
// io.ErrUnexpectedEOF or the network's error. Its other local errors (a
// message over a size limit, one that does not encode, a 304) are not.
func connectionFailed(ce *connect.Error, err error) bool {
	switch ce.Code() {
	case connect.CodeUnknown:
		return !connect.IsNotModifiedError(err)
	case connect.CodeCanceled, connect.CodeDeadlineExceeded:
		return true
	case connect.CodeInternal:
		var ne net.Error
		return errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
	}
	return false
}

// withCause returns err, an attempt's error, unchanged, or, when the
// interceptor found the library's ErrorInfo in it (got, its answer,
// unwraps to a sentinel then), a *connect.Error like it that also unwraps
// to that sentinel, so that errors.Is(err, idempotency.ErrKeyInUse) holds.
func withCause(err, got error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) || idempotency.Reason(got) == "" || idempotency.Reason(err) != "" {
		return err
	}
	out := connect.NewWireError(ce.Code(), &message{text: ce.Message(), err: errors.Join(err, got)})
	if !connect.IsWireError(err) {
		out = connect.NewError(ce.Code(), &message{text: ce.Message(), err: errors.Join(err, got)})
	}
	for _, d := range ce.Details() {
		out.AddDetail(d)
	}
	for k, vs := range ce.Meta() {
		out.Meta()[k] = slices.Clone(vs)
	}
	return out
}
