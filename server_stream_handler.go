package idempotency

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// handlerStream is the stream a handler gets: RecvMsg yields the requests
// read ahead (when buffered) and then io.EOF; with a call, the header and
// trailer are captured and what the handler sends is recorded; without
// one, they go to the caller without the replay marker, and the first
// skip messages are not sent.
type handlerStream struct {
	grpc.ServerStream // the caller's
	ctx               context.Context
	reqs              []proto.Message
	buffered          bool
	call              *streamCall // nil: not claimed
	skip              int         // without a call: the messages the caller already has
}

func (h *handlerStream) Context() context.Context { return h.ctx }

// RecvMsg copies the next request read ahead into m.
func (h *handlerStream) RecvMsg(m any) error {
	if !h.buffered {
		return h.ServerStream.RecvMsg(m)
	}
	if len(h.reqs) == 0 {
		return io.EOF
	}
	req := h.reqs[0]
	h.reqs = h.reqs[1:]
	dst, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("idempotency: RecvMsg into a %T, not a proto message", m)
	}
	if dst.ProtoReflect().Descriptor() == req.ProtoReflect().Descriptor() {
		proto.Reset(dst)
		proto.Merge(dst, req)
		return nil
	}
	b, err := proto.Marshal(req) // another type of the same message (WithDescriptors)
	if err != nil {
		return err
	}
	return proto.Unmarshal(b, dst)
}

// SendMsg sends m to the caller, and records it when claimed; without a
// claim, it skips the messages a resuming caller already has (skip). A
// client-streaming handler's response is held until its outcome is
// stored.
//
// A server stream's message is recorded once the caller has it, or once
// the caller has gone ([streamEnded]): a detached handler runs on after
// its caller left, and what it sends then belongs to the outcome that
// retries replay, so such a send returns nil, as it would with the caller
// still there. The messages a resuming caller already has are recorded,
// not sent. A send that grpc-go refuses for the message itself (one over
// its MaxSendMsgSize, one that does not encode) ends the stream: grpc-go
// sends the caller its error as the status, so the message is not
// recorded, the handler gets the error, every later send returns it, and
// the stream's outcome is what the caller got: the messages before it and
// that status ([streamed.refused]). After the caller has gone each message
// is still given to grpc-go, which checks it before it finds the stream
// ended, so that a message a live caller would not have got is refused
// then too.
func (h *handlerStream) SendMsg(m any) error {
	s := h.call
	switch {
	case s == nil && h.skip > 0:
		h.skip--
		return nil
	case s == nil:
		return h.ServerStream.SendMsg(m)
	case !s.serverStream:
		s.resp = m
		return nil
	case s.sent.refused != nil:
		return s.sent.refused
	}
	if s.sent.count >= s.resume {
		if err := h.ServerStream.SendMsg(m); err != nil && !streamEnded(err) {
			s.sent.refused = err // the message refused: not sent, not recorded
			s.md.end()
			return err
		}
	}
	s.md.messageSent()
	s.sent.add(m)
	return nil
}

// streamEnded reports whether a send failed with err because the caller's
// stream has ended: grpc-go says so with the send's own error (a cut
// connection is UNAVAILABLE, "transport is closing"; a stream it has marked
// done is CANCELED or DEADLINE_EXCEEDED, also before it cancels the
// stream's context). A refusal on a live stream (a message too large, one
// that does not encode) has another code. The stream's context cannot tell
// the two apart: grpc-go cancels it before a refused send returns, when it
// has sent the refusal to the caller as the stream's status.
func streamEnded(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded:
		return true
	}
	return false
}

func (h *handlerStream) SetHeader(md metadata.MD) error {
	if h.call == nil {
		return h.ServerStream.SetHeader(withoutMarker(md))
	}
	return h.call.md.SetHeader(md)
}

func (h *handlerStream) SendHeader(md metadata.MD) error {
	if h.call == nil {
		return h.ServerStream.SendHeader(withoutMarker(md))
	}
	return h.call.md.SendHeader(md)
}

func (h *handlerStream) SetTrailer(md metadata.MD) {
	if h.call == nil {
		h.ServerStream.SetTrailer(withoutMarker(md))
		return
	}
	_ = h.call.md.SetTrailer(md)
}
