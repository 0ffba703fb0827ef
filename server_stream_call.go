package idempotency

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
)

// streamCall is a keyed client-streaming or server-streaming gRPC call
// through the engine: the handler, the requests read ahead, and what the
// handler sends. It is the stream interceptor's [transport].
//
// A client-streaming handler's one response is held, stored and sent
// after the engine returns, as a unary response is ([reply]). A
// server-streaming handler's messages go to the caller as they are sent,
// and each is recorded ([streamed]); the outcome is the whole stream and
// its final status, replayed from an OUTCOME_STREAM record
// ([replayedStream]). Either comes with the header and trailer the
// handler set.
type streamCall struct {
	call
	srv          any
	ss           grpc.ServerStream // the caller's
	handler      grpc.StreamHandler
	serverStream bool // the handler sends a stream of messages
	reqs         []proto.Message
	resume       int           // messages the caller already has ([ResumeAfterKey])
	md           captureStream // the header and trailer the handler sets
	// reply is a client stream's answer; its type (reply.mt) is also that
	// of a server stream's messages.
	reply reply
	resp  any      // a client-streaming handler's response
	sent  streamed // a server-streaming handler's messages
}

// bypass runs the handler without a claim (the store failing open, or a
// call nested in one that holds the claim), sending the messages after
// those a resuming caller has.
func (s *streamCall) bypass(context.Context) (any, error) {
	return nil, passThroughStream(s.srv, s.ss, s.handler, s.reqs, s.resume)
}

// run runs the handler on a stream that yields the requests read ahead
// and records what it sends. It returns the client-streaming response, or
// the server stream's record.
func (s *streamCall) run(ctx context.Context) (any, error) {
	err := s.handler(s.srv, &handlerStream{ServerStream: s.ss, ctx: ctx, reqs: s.reqs, buffered: true, call: s})
	if s.serverStream {
		return &s.sent, err
	}
	return s.resp, err
}

// capture installs the header and trailer capture in the handler's
// context, without the resume point, which this call honours.
func (s *streamCall) capture(ctx context.Context) context.Context {
	if s.resume > 0 {
		ctx = withoutResume(ctx)
	}
	return s.md.install(ctx)
}

// record records a client stream's answer, or a server stream's messages
// and final status ([streamed.record]), and the header and trailer the
// handler set.
func (s *streamCall) record(rec *recordv1.Record, resp any, herr error, buf *[]byte) (size int, err error) {
	if s.serverStream {
		size, err = s.sent.record(rec, herr)
	} else {
		size, err = recordReply(rec, resp, herr, buf)
	}
	return size + s.md.record(rec), err
}

// replay returns the stored answer, which [streamCall.answer] sends, and
// sets the stored header and trailer: the replay marker goes in the
// header of a response or a stream, and in the trailer of an error, a
// stream's included.
func (s *streamCall) replay(_ context.Context, rec *recordv1.Record) (resp any, err error) {
	if s.serverStream {
		resp, err = replayStream(rec)
	} else {
		resp, err = s.reply.replay(rec)
	}
	if errors.Is(err, ErrRecordCorrupt) {
		return nil, err
	}
	ok := rec.GetOutcome() == recordv1.Outcome_OUTCOME_RESPONSE
	stream := rec.GetOutcome() == recordv1.Outcome_OUTCOME_STREAM
	failed := !ok && rec.GetStatus().GetCode() != 0 || rec.GetOutcome() == recordv1.Outcome_OUTCOME_NOT_RETAINED
	if h := fromRecordMD(rec.GetHeader(), ok || stream); len(h) > 0 {
		_ = s.ss.SetHeader(h)
	}
	if t := fromRecordMD(rec.GetTrailer(), failed); len(t) > 0 {
		s.ss.SetTrailer(t)
	}
	return resp, err
}

// errTxServerStream is NewTxOutcome's answer in a server-streaming handler.
var errTxServerStream = errors.New("idempotency: a server-streaming call's outcome is the stream its handler sends, " +
	"which the interceptor stores once the handler returns; it cannot be recorded in the handler's transaction")

// txRefused refuses a server stream's outcome, which is only whole once
// the handler returns (decision 102); a client stream's one response is
// recorded as a unary call's is.
func (s *streamCall) txRefused() error {
	if s.serverStream {
		return errTxServerStream
	}
	return nil
}

// request returns nil: a stream is not recovered (decision 295).
func (*streamCall) request() proto.Message { return nil }

// recovered is never called, since request is nil.
func (*streamCall) recovered(proto.Message) (any, error) {
	return nil, fmt.Errorf("%w: %s", ErrMisconfigured, problemStreamRecover)
}

// answer sends what the engine's answer holds that the handler has not
// sent already: a client-streaming response (executed or replayed), or a
// replayed server stream's messages after those the caller has. Then it
// returns the call's status: an executed server stream's is that of a
// send refused on it, if any ([streamed.status]).
func (s *streamCall) answer(ctx context.Context, resp any, err error) error {
	switch r := resp.(type) {
	case replayedStream:
		msgs, derr := r.decode(s.reply.mt, s.resume)
		if derr != nil {
			return s.e.fail(ctx, &s.subject, derr, s.storeTime)
		}
		for _, m := range msgs {
			if serr := s.ss.SendMsg(m); serr != nil {
				return serr
			}
		}
	case proto.Message:
		if err == nil && !s.serverStream {
			if serr := s.ss.SendMsg(r); serr != nil {
				return serr
			}
		}
	case *streamed:
		// A refused send ended the stream with its error, whatever the
		// handler returned: grpc-go sent it to the caller then (and an
		// interceptor before this one that refused a message gets it
		// now), as the outcome holds it.
		err = r.status(err)
	}
	if err != nil {
		return s.e.fail(ctx, &s.subject, err, s.storeTime)
	}
	return nil
}

// replayedStream is the answer of a replayed server stream: the stored
// messages, which [streamCall.answer] sends.
type replayedStream [][]byte

// replayStream returns the stream rec holds and its final status, or
// [ErrResponseNotRetained]. A record of one answer (a namespace shared by
// a server-streaming method and one that answers once) is corrupt.
func replayStream(rec *recordv1.Record) (any, error) {
	switch rec.GetOutcome() {
	case recordv1.Outcome_OUTCOME_STREAM:
		return replayedStream(rec.GetMessages()), replayedStatus(rec.GetStatus())
	case recordv1.Outcome_OUTCOME_NOT_RETAINED:
		return nil, ErrResponseNotRetained
	default:
		return nil, fmt.Errorf("%w: outcome %v does not fit the call (server-streaming: true)", ErrRecordCorrupt, rec.GetOutcome())
	}
}

// decode decodes the messages after the first skip into mt, all of them
// before any is sent, so a corrupt record sends none.
func (r replayedStream) decode(mt protoreflect.MessageType, skip int) ([]proto.Message, error) {
	if skip >= len(r) {
		return nil, nil
	}
	out := make([]proto.Message, 0, len(r)-skip)
	for i, b := range r[skip:] {
		m := mt.New().Interface()
		if err := proto.Unmarshal(b, m); err != nil {
			return nil, fmt.Errorf("%w: stream message %d: %w", ErrRecordCorrupt, skip+i+1, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// streamed records the messages a server-streaming handler sends, up to
// the size limit, each counting its encoded size plus 5 bytes (as
// [WithMaxStreamRequestBytes] counts requests, so a stream of empty
// messages is bounded too): past it, or on a message that is not a proto message
// or does not encode, it drops them and keeps why (err), and the outcome
// is not retained.
type streamed struct {
	typ   string // the method's response type
	limit int    // the size limit ([WithMaxResponseBytes])
	msgs  [][]byte
	size  int
	count int   // messages sent, recorded or not
	err   error // why the stream cannot be retained
	// refused is the error of a send grpc-go refused on a live stream,
	// which it sent the caller as the stream's status: the stream ended
	// there, and its outcome ends with it, whatever the handler returns
	// (a retryable error still releases the key).
	refused error
}

// status is the stream's final status: the refused send's, if any, else
// the handler's error herr.
func (s *streamed) status(herr error) error {
	if s.refused != nil {
		return s.refused
	}
	return herr
}

// record fills in rec with the stream: its messages, and its final status
// when it ended in an error (a send grpc-go refused, else the handler's
// herr). It returns their size, and why the stream cannot be retained, if
// it cannot.
func (s *streamed) record(rec *recordv1.Record, herr error) (int, error) {
	rec.Outcome, rec.ResponseType, rec.Messages = recordv1.Outcome_OUTCOME_STREAM, s.typ, s.msgs
	size := s.size
	if end := s.status(herr); end != nil {
		rec.Status = recordStatus(end)
		size += proto.Size(rec.Status)
	}
	return size, s.err
}

func (s *streamed) add(m any) {
	s.count++
	if s.err != nil {
		return
	}
	msg, ok := m.(proto.Message)
	if !ok {
		s.drop(errNotProto)
		return
	}
	b, _, err := encodeMessage(nil, msg)
	switch {
	case err != nil:
		s.drop(err)
	case s.size+len(b)+frameHeader > s.limit:
		s.drop(errTooLarge)
	default:
		s.size += len(b) + frameHeader
		s.msgs = append(s.msgs, b)
	}
}

func (s *streamed) drop(err error) {
	s.err, s.msgs = err, nil
}
