package idempotency

import (
	"context"
	"errors"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
)

// unaryCall is a unary gRPC call through the engine: the handler and its
// request, and the stream that captures the header and trailer the
// handler sets. It is the unary interceptor's [transport]: its outcome is
// one response or a stored error ([reply]), with that header and trailer.
type unaryCall struct {
	call
	req     any
	handler grpc.UnaryHandler
	stream  captureStream
	reply   reply
}

// intercept is the unary server interceptor: it resolves the method's
// policy and the key, then hands the call to the engine.
func (e *engine) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m := e.method(info.FullMethod, req)
	msg, isProto := req.(proto.Message)
	if m.mode == ModeDisabled || !isProto {
		return passThrough(ctx, req, handler)
	}
	key, err := e.clientKey(ctx, m, msg)
	if err == nil && key == "" && m.mode == ModeRequired {
		err = e.keyMissing()
	}
	if err != nil {
		return nil, e.fail(ctx, methodSubject(info.FullMethod, m), err, 0)
	}
	if key == "" { // an OPTIONAL method called without a key
		return passThrough(ctx, req, handler)
	}
	u := &unaryCall{req: req, handler: handler, reply: methodReply(e.cfg.files, m)}
	u.t = u
	if err := e.prepare(ctx, &u.call, info.FullMethod, m.namespace, m, key, msg); err != nil {
		return nil, e.fail(ctx, methodSubject(info.FullMethod, m), err, 0)
	}
	resp, err := e.run(ctx, &u.call)
	if err != nil {
		return nil, e.fail(ctx, &u.subject, err, u.storeTime)
	}
	return resp, nil
}

func (u *unaryCall) bypass(ctx context.Context) (any, error) {
	return passThrough(ctx, u.req, u.handler)
}

func (u *unaryCall) run(ctx context.Context) (any, error) { return u.handler(ctx, u.req) }

func (u *unaryCall) capture(ctx context.Context) context.Context { return u.stream.install(ctx) }

// record records the handler's answer and the header and trailer it set.
func (u *unaryCall) record(rec *recordv1.Record, resp any, herr error, buf *[]byte) (int, error) {
	size, err := recordReply(rec, resp, herr, buf)
	return size + u.stream.record(rec), err
}

// replay returns the stored answer and sets the stored header and trailer,
// with the replay marker in the header of a response and in the trailer
// of an error.
func (u *unaryCall) replay(ctx context.Context, rec *recordv1.Record) (any, error) {
	resp, err := u.reply.replay(rec)
	if !errors.Is(err, ErrRecordCorrupt) {
		ok := rec.GetOutcome() == recordv1.Outcome_OUTCOME_RESPONSE
		setReplayMD(ctx, fromRecordMD(rec.GetHeader(), ok), fromRecordMD(rec.GetTrailer(), !ok))
	}
	return resp, err
}

func (*unaryCall) txRefused() error { return nil }

func (u *unaryCall) request() proto.Message { return u.req.(proto.Message) } // checked by intercept

func (u *unaryCall) recovered(msg proto.Message) (any, error) { return u.reply.recovered(msg) }

// setReplayMD sets the replayed header and trailer. Errors are ignored as
// grpc-go ignores them for handlers: they mean the stream is gone.
func setReplayMD(ctx context.Context, header, trailer map[string][]string) {
	if len(header) > 0 {
		_ = grpc.SetHeader(ctx, header)
	}
	if len(trailer) > 0 {
		_ = grpc.SetTrailer(ctx, trailer)
	}
}

// fail reports the engine's own errors to the observer and turns them
// into the status the client sees, and answers a failed scope or
// fingerprint function as decision 7 says. Handler errors and replayed
// statuses pass through unchanged.
func (e *engine) fail(ctx context.Context, s *subject, err error, storeTime time.Duration) error {
	if hf, ok := err.(*hookFailure); ok { //nolint:errorlint // the engine returns its *hookFailure unwrapped
		return hf.status()
	}
	f, own := e.report(ctx, s, err, storeTime)
	if !own {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			if _, ok := status.FromError(err); !ok {
				return status.FromContextError(err).Err()
			}
		}
		return err
	}
	if f.pushback {
		ms := strconv.FormatInt(e.cfg.retryAfter.Milliseconds(), 10)
		_ = grpc.SetTrailer(ctx, metadata.Pairs(pushbackKey, ms))
	}
	return statusOf(f, err, e.cfg.retryAfter).Err()
}
