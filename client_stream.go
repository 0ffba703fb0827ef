package idempotency

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

func (c *clientInterceptor) interceptStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	replayed := replayedDst(opts)
	if desc.ClientStreams && desc.ServerStreams {
		return c.pass(ctx, desc, cc, method, streamer, opts)
	}
	m := c.method(method, nil)
	if !m.keyed {
		return c.pass(ctx, desc, cc, method, streamer, opts)
	}
	s := &retryStream{c: c, m: m, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts,
		holding:    c.cfg.maxAttempts > 1 && (!desc.ClientStreams || c.cfg.maxStreamBuffer > 0),
		resumeBase: resumeOf(ctx), replayed: replayed, headerDsts: headerDsts(opts)}
	if m.keyField != nil {
		return s, nil // started by the first request, which may carry the key
	}
	if err := s.start(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// pass starts a stream the interceptor passes through, whose errors it
// returns as [clientError] does.
func (c *clientInterceptor) pass(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts []grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, clientError(err)
	}
	return passStream{cs}, nil
}

// resumeOf returns the [ResumeAfterKey] the caller put in the outgoing
// metadata of ctx, or 0.
func resumeOf(ctx context.Context) int {
	vals := metadata.ValueFromOutgoingContext(ctx, ResumeAfterKey)
	if len(vals) != 1 {
		return 0
	}
	n, err := strconv.Atoi(vals[0])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// retryStream is a keyed client- or server-streaming call: the caller's
// one stream over as many attempts as its retries take. One mutex guards
// the attempt and what is held; a receive waits on the attempt without
// it, so that a send may run meanwhile, as gRPC allows.
type retryStream struct {
	c        *clientInterceptor
	m        *clientMethod
	ctx      context.Context // the caller's; with the key once started
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	mu         sync.Mutex
	cur        grpc.ClientStream // the attempt; nil until started
	attempt    int               // its number, from 1
	held       []proto.Message   // copies of the messages sent, while holding
	heldBytes  int
	holding    bool // held has every message sent: the call may be retried
	closed     bool // the caller closed its side
	received   int  // messages the caller received (server streams)
	resumeBase int  // the caller's own ResumeAfterKey
	header     metadata.MD
	headerSet  bool  // header is the first header an attempt received
	failed     error // the error the call ended with before or between attempts
	replayed   *bool // ReplayedInto's destination, or nil
	headerDsts []*metadata.MD
	ended      bool               // the call has ended
	callCtx    *callContext       // Context's, made when first asked for
	cancel     context.CancelFunc // callCtx's
}

// start puts the key in the call's context, with first, the first request
// or nil, for the key field, and starts the first attempt. mu is held.
func (s *retryStream) start(first any) error {
	ctx, err := s.c.attachKey(s.ctx, s.method, s.m.fieldKey(first), s.opts)
	if err == nil {
		s.ctx = ctx
		err = s.next()
	}
	if err != nil {
		s.failed = clientError(err)
		s.finish()
		return s.failed
	}
	return nil
}

// next starts the next attempt: the stream, the messages held, and the
// end of the caller's side if it closed it. A stream that fails to start
// is an attempt that failed, retried as one. mu is held.
func (s *retryStream) next() error {
	for {
		s.attempt++
		cs, err := s.streamer(s.attemptContext(), s.desc, s.cc, s.method, s.opts...)
		if err == nil {
			s.cur = cs
			s.resend()
			return nil
		}
		if !s.holding {
			return err
		}
		if err := s.c.beforeRetry(s.ctx, s.attempt, err, nil, false); err != nil {
			return err
		}
	}
}

// attemptContext returns the context of the next attempt: a retry of a
// server stream carries the number of messages the caller has.
func (s *retryStream) attemptContext() context.Context {
	if s.attempt == 1 || s.desc.ClientStreams {
		return s.ctx
	}
	md, _ := metadata.FromOutgoingContext(s.ctx)
	md.Set(ResumeAfterKey, strconv.Itoa(s.resumeBase+s.received))
	return metadata.NewOutgoingContext(s.ctx, md)
}

// resend sends the messages held on a new attempt, and closes its side
// if the caller has closed. An attempt is given every message and the
// end, whatever it answers: see [retryStream.SendMsg].
func (s *retryStream) resend() {
	for _, m := range s.held {
		_ = s.cur.SendMsg(m) // io.EOF or a failure: the status comes from RecvMsg
	}
	if s.closed {
		_ = s.cur.CloseSend() // always nil: the status comes from RecvMsg
	}
}

// retry retries the call after its attempt failed with err, or returns
// the error the call ends with. mu is held.
func (s *retryStream) retry(err error) error {
	if !s.holding {
		return err
	}
	s.keepHeader()
	if err := s.c.beforeRetry(s.ctx, s.attempt, err, s.cur.Trailer(), false); err != nil {
		return err
	}
	return s.next()
}

// keepHeader keeps the header of the attempt that is ending, when it got
// one and no earlier attempt did. mu is held.
func (s *retryStream) keepHeader() {
	if s.headerSet {
		return
	}
	if h, _ := s.cur.Header(); h != nil { // the attempt has ended: it does not block
		s.header, s.headerSet = h, true
	}
}

// hold keeps a copy of m for the retries, while the bound allows. mu is
// held.
func (s *retryStream) hold(m any) {
	if !s.holding {
		return
	}
	msg, ok := m.(proto.Message)
	if !ok {
		s.drop()
		return
	}
	size := proto.Size(msg) + frameHeader
	if s.desc.ClientStreams && s.heldBytes+size > s.c.cfg.maxStreamBuffer {
		s.drop()
		return
	}
	s.held = append(s.held, proto.Clone(msg))
	s.heldBytes += size
}

// drop stops holding: the call is no longer retried.
func (s *retryStream) drop() {
	s.holding, s.held, s.heldBytes = false, nil, 0
}

// SendMsg sends m on the attempt, keeping a copy for the retries.
//
// An attempt that answered io.EOF is still given every later message and
// the end of the caller's side: grpc-go answers io.EOF for a stream its
// transport closed before the server saw it, keeps the message, and
// replays what it kept on a new stream when the status is asked for
// (transparent retry). An attempt left with its first messages and an
// end would run the handler on a request cut short; with no end, it
// would leave the server waiting (TestStreamClientUnprocessedAttempt).
func (s *retryStream) SendMsg(m any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.failed != nil && s.cur == nil:
		return s.failed
	case s.failed != nil:
		return io.EOF // as gRPC's after the stream ended
	case s.cur == nil:
		if err := s.start(m); err != nil {
			return err
		}
	}
	s.hold(m)
	err := s.cur.SendMsg(m)
	if !errors.Is(err, io.EOF) {
		return clientError(err)
	}
	if s.holding {
		return nil // held: sent again by the retry RecvMsg makes
	}
	return io.EOF // as gRPC's: the status comes from RecvMsg
}

// CloseSend closes the caller's side of the stream.
func (s *retryStream) CloseSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	if s.cur == nil {
		if err := s.start(nil); err != nil {
			return err
		}
	}
	s.closed = true
	return clientError(s.cur.CloseSend())
}

// RecvMsg receives the next message, retrying the call, with the same
// key, when its attempt fails with a retryable answer.
func (s *retryStream) RecvMsg(m any) error {
	for {
		s.mu.Lock()
		if s.failed == nil && s.cur == nil {
			_ = s.start(nil) // sets failed
		}
		if s.failed != nil {
			s.mu.Unlock()
			return s.failed
		}
		cur := s.cur
		s.mu.Unlock()

		err := cur.RecvMsg(m)
		s.mu.Lock()
		switch {
		case err == nil:
			if s.desc.ServerStreams {
				s.received++
			}
			s.report(!s.desc.ServerStreams) // a client stream's one response ends it
			if !s.desc.ServerStreams {
				s.finish()
			}
		case errors.Is(err, io.EOF):
			s.report(true)
			s.finish()
		default: // only a receive changes the attempt, and gRPC allows one at a time
			if rerr := s.retry(err); rerr != nil {
				s.failed = clientError(rerr)
				err = s.failed
				s.report(true)
				s.finish()
			} else {
				s.mu.Unlock()
				continue
			}
		}
		s.mu.Unlock()
		return err
	}
}

// report sets the destination of [ReplayedInto], if any, to [Replayed] of
// the header the caller sees and, once the call has ended, the last
// attempt's trailer. mu is held, and the attempt has received a message
// or ended, so its Header does not block.
func (s *retryStream) report(ended bool) {
	if s.replayed == nil || s.cur == nil {
		return
	}
	var trailer metadata.MD
	if ended {
		trailer = s.cur.Trailer()
	}
	*s.replayed = Replayed(s.callHeader(), trailer)
}

// Header returns the header of the first attempt that received one: the
// header the caller saw, if it saw one, stays the header of the call.
func (s *retryStream) Header() (metadata.MD, error) {
	s.mu.Lock()
	if s.failed == nil && s.cur == nil {
		_ = s.start(nil) // a failure is RecvMsg's to return, as gRPC's
	}
	if s.headerSet || s.cur == nil {
		h := s.header
		s.mu.Unlock()
		return h, nil
	}
	cur := s.cur
	s.mu.Unlock()
	h, err := cur.Header()
	return h, clientError(err)
}

// Trailer returns the trailer of the last attempt.
func (s *retryStream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	return s.cur.Trailer()
}
