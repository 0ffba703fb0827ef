package connectidempotency

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
)

// unaryCall is a unary connect-go call on its way through the unary
// server interceptor: the handler it wraps (next), and the answer of a run.
//
// The handler's answer is recorded as a grpc-go handler's is: its response
// message, or the status of its *connect.Error; the headers it set (on the
// response, or on the call's context: connect.CallInfoForHandlerContext)
// as the header; and its trailers and the metadata of its error as the
// trailer. A run's answer goes to the caller as the handler returned it.
// A replay is built from the record ([unaryCall.answer]).
type unaryCall struct {
	next connect.UnaryFunc
	req  connect.AnyRequest
	tr   transport
	ran  bool // the handler ran for this call
	resp connect.AnyResponse
	err  error
}

// handle is the grpc.UnaryHandler the interceptor runs: it runs the
// connect-go handler, on the interceptor's context, and returns its answer
// as a grpc-go handler's.
func (c *unaryCall) handle(ctx context.Context, _ any) (any, error) {
	c.ran = true
	resp, err := c.next(ctx, c.req)
	c.resp, c.err = resp, err
	info, _ := connect.CallInfoForHandlerContext(ctx)
	var ce *connect.Error
	if !errors.As(err, &ce) || connect.IsWireError(err) {
		ce = nil // connect-go does not send a wire error's metadata
	}
	stripLive(info, resp, ce)
	if _, claimed := idempotency.ClaimFromContext(ctx); claimed {
		var header, trailer []http.Header
		if info != nil {
			header, trailer = append(header, info.ResponseHeader()), append(trailer, info.ResponseTrailer())
		}
		if resp != nil {
			header, trailer = append(header, resp.Header()), append(trailer, resp.Trailer())
		}
		if ce != nil {
			trailer = append(trailer, ce.Meta())
		}
		if md := responseMD(nil, header...); md != nil {
			_ = grpc.SetHeader(ctx, md)
		}
		if md := responseMD(nil, trailer...); md != nil {
			_ = grpc.SetTrailer(ctx, md)
		}
	}
	if err != nil {
		return nil, asStatus(err)
	}
	if resp == nil {
		return nil, nil // connect-go refuses it: not retained
	}
	return resp.Any(), nil
}

// answer returns the interceptor's answer as connect-go's: the handler's
// own when it ran; else a replay, with the stored header and trailer, the
// replay marker among them, or a refusal, with its pushback trailer.
//
// A replayed response's message is the stored one, decoded into the
// method's response type; connect-go encodes it as it encodes the
// handler's. A *connect.Response is generic in its message's Go type,
// which an interceptor does not know, so the message comes as a
// [replayedMessage] holding it.
//
// A replayed error carries the stored trailer as its metadata, and the
// stored header goes into the call's response header: connect-go sends
// both where it sent the original's.
func (c *unaryCall) answer(ctx context.Context, out any, err error) (connect.AnyResponse, error) {
	if c.ran {
		return c.resp, c.err
	}
	if err != nil {
		err = fromStatus(err)
		if ce, ok := err.(*connect.Error); ok { //nolint:errorlint // fromStatus returns the *connect.Error itself, unwrapped
			addReplayMD(ce.Meta(), c.tr.trailer, c.tr.marker)
			if info, ok := connect.CallInfoForHandlerContext(ctx); ok && len(c.tr.header) > 0 {
				addReplayMD(info.ResponseHeader(), c.tr.header, c.tr.marker)
			}
		}
		return nil, err
	}
	msg, _ := out.(proto.Message)
	resp := connect.NewResponse(&replayedMessage{msg})
	addReplayMD(resp.Header(), c.tr.header, c.tr.marker)
	addReplayMD(resp.Trailer(), c.tr.trailer, c.tr.marker)
	return resp, nil
}

// replayedMessage is a replayed response message as a *connect.Response
// holds it: it is a proto.Message, the stored message in the method's
// response type, so connect-go's codecs encode it as that message; its Go
// type is replayedMessage.
type replayedMessage struct{ proto.Message }

// stripLive removes the replay marker from a live answer: what the handler
// set on the call's context, on its response and on its error.
func stripLive(info connect.CallInfo, resp connect.AnyResponse, ce *connect.Error) {
	if info != nil {
		stripMarker(info.ResponseHeader(), info.ResponseTrailer())
	}
	if resp != nil {
		stripMarker(resp.Header(), resp.Trailer())
	}
	if ce != nil {
		stripMarker(ce.Meta())
	}
}

// passUnary runs a call the interceptor leaves alone (NO_SIDE_EFFECTS, a
// request that is not a proto message), with the replay marker removed
// from its answer.
func passUnary(ctx context.Context, req connect.AnyRequest, next connect.UnaryFunc) (connect.AnyResponse, error) {
	resp, err := next(ctx, req)
	info, _ := connect.CallInfoForHandlerContext(ctx)
	var ce *connect.Error
	if !errors.As(err, &ce) {
		ce = nil
	}
	stripLive(info, resp, ce)
	return resp, err
}
