package connectidempotency

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// WrapStreamingClient runs a client-streaming or server-streaming call
// through the stream client interceptor, which makes one attempt after
// another, each a connect-go conn of its own. Bidirectional streams and
// NO_SIDE_EFFECTS procedures pass through.
func (c *clientInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		first := next(ctx, spec)
		if spec.StreamType == connect.StreamTypeBidi || spec.IdempotencyLevel == connect.IdempotencyNoSideEffects {
			return first
		}
		return &clientStream{c: c, next: next, ctx: ctx, spec: spec, first: first}
	}
}

// clientStream is a keyed client-streaming or server-streaming call as the
// caller sees it: one connect-go conn over as many attempts as its retries
// take. It starts the interceptor's stream at the caller's first send,
// close or receive, once the caller has set the request's header (on
// the first attempt's conn, made up front, whose header every attempt
// copies). The interceptor decides on the key, the retries, what is held
// and resent, and where a retry resumes; each attempt is an [attempt].
type clientStream struct {
	c     *clientInterceptor
	next  connect.StreamingClientFunc
	ctx   context.Context
	spec  connect.Spec
	first connect.StreamingClientConn

	mu       sync.Mutex
	started  bool
	cs       grpc.ClientStream
	startErr error

	amu      sync.Mutex
	attempts []*attempt
}

var _ connect.StreamingClientConn = (*clientStream)(nil)

func (s *clientStream) Spec() connect.Spec         { return s.spec }
func (s *clientStream) Peer() connect.Peer         { return s.first.Peer() }
func (s *clientStream) RequestHeader() http.Header { return s.first.RequestHeader() }

// start starts the interceptor's stream, once.
func (s *clientStream) start() (grpc.ClientStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.started = true
		desc := &grpc.StreamDesc{
			ClientStreams: s.spec.StreamType&connect.StreamTypeClient != 0,
			ServerStreams: s.spec.StreamType&connect.StreamTypeServer != 0,
		}
		ctx := outgoing(s.ctx, s.first.RequestHeader())
		s.cs, s.startErr = s.c.stream(ctx, desc, nil, s.spec.Procedure, s.streamer)
	}
	return s.cs, s.startErr
}

// streamer is the grpc.Streamer the interceptor starts each attempt with:
// the first attempt is the conn made up front, each later one a new conn,
// with the caller's header, after the earlier attempt's is closed. The
// attempt's outgoing metadata (the key, the resume point) goes into its
// header.
func (s *clientStream) streamer(ctx context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	s.amu.Lock()
	defer s.amu.Unlock()
	conn := s.first
	if n := len(s.attempts); n > 0 {
		_ = s.attempts[n-1].close() // replaced by the next attempt: its close error is of no use
		conn = s.next(ctx, s.spec)
		h := conn.RequestHeader()
		for k, vs := range s.first.RequestHeader() {
			if !isProtocolHeader(k) {
				h[k] = slices.Clone(vs)
			}
		}
	}
	setOutgoing(conn.RequestHeader(), ctx)
	a := &attempt{conn: conn, ctx: ctx}
	s.attempts = append(s.attempts, a)
	return a, nil
}

// last returns the latest attempt, nil before the first.
func (s *clientStream) last() *attempt {
	s.amu.Lock()
	defer s.amu.Unlock()
	if len(s.attempts) == 0 {
		return nil
	}
	return s.attempts[len(s.attempts)-1]
}

// Send sends m on the call, starting it with the first message.
func (s *clientStream) Send(m any) error {
	cs, err := s.start()
	if err == nil {
		err = cs.SendMsg(m)
	}
	return s.callError(err)
}

// CloseRequest closes the caller's side of the call.
func (s *clientStream) CloseRequest() error {
	cs, err := s.start()
	if err == nil {
		err = cs.CloseSend()
	}
	return s.callError(err)
}

// Receive receives the next message, the interceptor retrying the call as
// it does a grpc-go stream's.
func (s *clientStream) Receive(m any) error {
	cs, err := s.start()
	if err == nil {
		err = cs.RecvMsg(m)
	}
	return s.callError(err)
}

// ResponseHeader is the header of the first attempt that received one, as
// the gRPC stream client interceptor's Header is, else the latest
// attempt's: a resumed stream keeps the header its caller saw first.
func (s *clientStream) ResponseHeader() http.Header {
	s.amu.Lock()
	attempts := slices.Clone(s.attempts)
	s.amu.Unlock()
	if len(attempts) == 0 {
		return s.first.ResponseHeader()
	}
	for _, a := range attempts[:len(attempts)-1] { // ended: their header does not block
		if h := a.conn.ResponseHeader(); len(h) > 0 {
			return h
		}
	}
	return attempts[len(attempts)-1].conn.ResponseHeader()
}

// ResponseTrailer is the latest attempt's trailer.
func (s *clientStream) ResponseTrailer() http.Header {
	if a := s.last(); a != nil {
		return a.conn.ResponseTrailer()
	}
	return s.first.ResponseTrailer()
}

// CloseResponse closes the call: the latest attempt's conn (the earlier
// ones were closed as the next started), or the conn made up front.
func (s *clientStream) CloseResponse() error {
	if a := s.last(); a != nil {
		return a.close()
	}
	return s.first.CloseResponse()
}

// callError returns err, the interceptor's, as connect-go's: io.EOF as it
// is, an attempt's error as the attempt got it ([withCause]), the
// interceptor's own as a *connect.Error.
func (s *clientStream) callError(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	s.amu.Lock()
	attempts := slices.Clone(s.attempts)
	s.amu.Unlock()
	for _, a := range slices.Backward(attempts) {
		if orig, got := a.failure(); got != nil && errors.Is(err, got) {
			return withCause(orig, err)
		}
	}
	return fromStatus(err)
}

// attempt is one attempt's connect-go conn as a grpc.ClientStream, whose
// errors the interceptor reads as a grpc-go stream's ([clientStatus]).
type attempt struct {
	conn connect.StreamingClientConn
	ctx  context.Context

	mu     sync.Mutex
	err    error // the last error of the conn, as it came
	got    error // and as the interceptor got it
	closed bool
}

var _ grpc.ClientStream = (*attempt)(nil)

func (a *attempt) Context() context.Context { return a.ctx }

// Header is the attempt's header, nil when it got none.
func (a *attempt) Header() (metadata.MD, error) {
	return clientMD(nil, a.conn.ResponseHeader()), nil
}

func (a *attempt) Trailer() metadata.MD {
	return clientMD(nil, a.conn.ResponseTrailer())
}

func (a *attempt) SendMsg(m any) error { return a.result(a.conn.Send(m)) }
func (a *attempt) RecvMsg(m any) error { return a.result(a.conn.Receive(m)) }
func (a *attempt) CloseSend() error    { return a.result(a.conn.CloseRequest()) }
func (a *attempt) failure() (error, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err, a.got
}

// result returns err as the interceptor reads it: io.EOF at the end of
// the stream (connect-go's error wraps it), any other error as a status.
func (a *attempt) result(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return io.EOF
	}
	got := clientStatus(a.ctx, err)
	a.mu.Lock()
	a.err, a.got = err, got
	a.mu.Unlock()
	return got
}

// close closes the attempt's conn, once.
func (a *attempt) close() error {
	a.mu.Lock()
	closed := a.closed
	a.closed = true
	a.mu.Unlock()
	if closed {
		return nil
	}
	_ = a.conn.CloseRequest()
	return a.conn.CloseResponse()
}
