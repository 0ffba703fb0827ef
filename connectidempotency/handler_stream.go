package connectidempotency

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// A streaming connect-go call goes through the stream server interceptor
// as a grpc-go stream: [serverStream] is the connect-go conn as the
// grpc.ServerStream the interceptor reads and answers; the handler gets
// [handlerConn], the stream the interceptor hands its own handler as the
// connect-go conn it expects. So the interceptor reads a keyed stream's
// requests ahead, records what the handler sends and sets, detaches it
// from its caller and replays or resumes a stored stream, by its own code.

// serverStream is a connect-go conn as a grpc.ServerStream.
type serverStream struct {
	ctx  context.Context // the call's, with its headers as incoming metadata and tr as its transport stream
	conn connect.StreamingHandlerConn
	tr   transport
}

var _ grpc.ServerStream = (*serverStream)(nil)

func newServerStream(ctx context.Context, conn connect.StreamingHandlerConn) *serverStream {
	s := &serverStream{conn: conn}
	s.tr.method, s.tr.conn = conn.Spec().Procedure, conn
	s.ctx = s.tr.install(ctx, conn.RequestHeader(), conn.Peer().Protocol)
	return s
}

func (s *serverStream) Context() context.Context        { return s.ctx }
func (s *serverStream) SetHeader(md metadata.MD) error  { return s.tr.SetHeader(md) }
func (s *serverStream) SendHeader(md metadata.MD) error { return s.tr.SendHeader(md) }
func (s *serverStream) SetTrailer(md metadata.MD)       { _ = s.tr.SetTrailer(md) }

// SendMsg sends m, and with the first message the header. Its error is a
// refusal of m, or a stream that has ended ([sendError]).
func (s *serverStream) SendMsg(m any) error {
	s.tr.markSent()
	if err := s.conn.Send(m); err != nil {
		return sendError(err)
	}
	return nil
}

// RecvMsg receives the next request, or connect-go's error wrapping io.EOF
// at the end.
func (s *serverStream) RecvMsg(m any) error { return s.conn.Receive(m) }

// handler returns the grpc.StreamHandler the interceptor runs: next, the
// connect-go handler, on a [handlerConn] over the interceptor's stream.
// What the handler set reaches the interceptor's stream as a grpc-go
// handler's would: the header with the first message (or at the end), the
// trailer and the metadata of its error at the end (that metadata only
// recorded, as connect-go sends the error's metadata itself). Its error
// goes back as a status ([asStatus]).
func (s *serverStream) handler(next connect.StreamingHandlerFunc) grpc.StreamHandler {
	return func(_ any, hs grpc.ServerStream) error {
		c := &handlerConn{hs: hs, conn: s.conn}
		err := next(hs.Context(), c)
		c.flushHeader()
		if md := responseMD(nil, c.trailer); md != nil {
			hs.SetTrailer(md)
		}
		var ce *connect.Error
		if errors.As(err, &ce) && !connect.IsWireError(err) && len(ce.Meta()) > 0 {
			stripMarker(ce.Meta())
			if md := responseMD(nil, ce.Meta()); md != nil {
				s.tr.mu.Lock()
				s.tr.recordOnly = true
				s.tr.mu.Unlock()
				hs.SetTrailer(md)
				s.tr.mu.Lock()
				s.tr.recordOnly = false
				s.tr.mu.Unlock()
			}
		}
		if err != nil {
			return asStatus(err)
		}
		return nil
	}
}

// answer returns the interceptor's answer as connect-go's: the handler's
// own error as it returned it, a replayed status or a refusal as a
// *connect.Error (its trailer, the replay marker or the pushback, is in
// the conn's already).
func (s *serverStream) answer(err error) error {
	if se, ok := err.(*statusError); ok { //nolint:errorlint // our own *statusError comes back as it is; any other error, a wrapped one too, goes through fromStatus
		return se.err
	}
	return fromStatus(err)
}

// handlerConn is the stream the interceptor hands its handler (hs), as the
// connect-go conn the handler expects: it receives and sends through hs,
// and keeps the header and trailer the handler sets until they go to hs.
type handlerConn struct {
	hs              grpc.ServerStream
	conn            connect.StreamingHandlerConn // the caller's, for what hs does not carry
	header, trailer http.Header
	flushed         bool // the header went to hs
}

var _ connect.StreamingHandlerConn = (*handlerConn)(nil)

func (c *handlerConn) Spec() connect.Spec          { return c.conn.Spec() }
func (c *handlerConn) Peer() connect.Peer          { return c.conn.Peer() }
func (c *handlerConn) RequestHeader() http.Header  { return c.conn.RequestHeader() }
func (c *handlerConn) Receive(m any) error         { return c.hs.RecvMsg(m) }
func (c *handlerConn) ResponseHeader() http.Header { return lazy(&c.header) }
func (c *handlerConn) ResponseTrailer() http.Header {
	return lazy(&c.trailer)
}

// Send sends m through hs, the header first: connect-go sends a stream's
// header with its first message, and ignores it after.
func (c *handlerConn) Send(m any) error {
	c.flushHeader()
	return c.hs.SendMsg(m)
}

func (c *handlerConn) flushHeader() {
	if c.flushed {
		return
	}
	c.flushed = true
	if md := responseMD(nil, c.header); md != nil {
		_ = c.hs.SetHeader(md)
	}
}

func lazy(h *http.Header) http.Header {
	if *h == nil {
		*h = make(http.Header)
	}
	return *h
}

// passStream runs a stream the interceptor leaves alone
// (NO_SIDE_EFFECTS), with the replay marker removed from its header and
// trailer.
func passStream(ctx context.Context, conn connect.StreamingHandlerConn, next connect.StreamingHandlerFunc) error {
	c := &markerFree{StreamingHandlerConn: conn}
	err := next(ctx, c)
	stripMarker(conn.ResponseTrailer())
	var ce *connect.Error
	if errors.As(err, &ce) {
		stripMarker(ce.Meta())
	}
	if !c.sent {
		stripMarker(conn.ResponseHeader())
	}
	return err
}

// markerFree strips the replay marker from a stream's header before its
// first message.
type markerFree struct {
	connect.StreamingHandlerConn
	sent bool
}

func (c *markerFree) Send(m any) error {
	if !c.sent {
		c.sent = true
		stripMarker(c.ResponseHeader())
	}
	return c.StreamingHandlerConn.Send(m)
}
