package connectidempotency

import (
	"context"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// transport is a connect-go call as grpc-go's transport stream, through
// which the interceptors set the header and trailer of a call: a replay's,
// with the replay marker, the pushback trailer of a refusal, and, through
// the capture they install, what the handler set. Of a unary call it keeps
// them for the answer [unaryCall.answer] builds; of a stream it writes them
// to the connect-go conn's own, from which connect-go sends them.
type transport struct {
	method string
	conn   connect.StreamingHandlerConn // nil for a unary call
	marker string                       // the replay marker's name on the call's protocol ([markerName])

	mu              sync.Mutex
	header, trailer metadata.MD // of a unary call
	// sent: a stream's header has gone with its first message, or with
	// SendHeader.
	sent bool
	// recordOnly: the trailer being set is the metadata of the error the
	// handler returns, which connect-go sends itself; it is set for the
	// capture to record it, and not written.
	recordOnly bool
}

var _ grpc.ServerTransportStream = (*transport)(nil)

// errHeaderSent is grpc-go's error for a header set or sent after the
// header went.
var errHeaderSent = status.Error(codes.Internal, "transport: SendHeader called multiple times")

// install returns ctx carrying t as its transport stream, with h, the
// request's headers, as its incoming metadata; protocol is the call's
// (connect.Peer's Protocol).
func (t *transport) install(ctx context.Context, h map[string][]string, protocol string) context.Context {
	t.marker = markerName(protocol)
	ctx = metadata.NewIncomingContext(ctx, incomingMD(h))
	return grpc.NewContextWithServerTransportStream(ctx, t)
}

func (t *transport) Method() string { return t.method }

func (t *transport) SetHeader(md metadata.MD) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sent {
		return errHeaderSent
	}
	if t.conn == nil {
		t.header = join(t.header, md)
		return nil
	}
	addReplayMD(t.conn.ResponseHeader(), md, t.marker)
	return nil
}

// SendHeader sets md and marks the header sent: connect-go sends it with
// the first message, or at the end of a stream without one.
func (t *transport) SendHeader(md metadata.MD) error {
	if err := t.SetHeader(md); err != nil {
		return err
	}
	t.mu.Lock()
	t.sent = true
	t.mu.Unlock()
	return nil
}

func (t *transport) SetTrailer(md metadata.MD) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.recordOnly:
	case t.conn == nil:
		t.trailer = join(t.trailer, md)
	default:
		addReplayMD(t.conn.ResponseTrailer(), md, t.marker)
	}
	return nil
}

// markSent marks a stream's header sent, as its first message sends it.
func (t *transport) markSent() {
	t.mu.Lock()
	t.sent = true
	t.mu.Unlock()
}

// join returns md added to into; md itself when into is empty (the
// interceptors do not change metadata they have set).
func join(into, md metadata.MD) metadata.MD {
	if len(into) == 0 {
		return md
	}
	return metadata.Join(into, md)
}
