package idempotency

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// interceptStream is the stream server interceptor: it resolves the
// method's policy and the key, reads the requests of a keyed call, and
// hands the call to the engine. Bidirectional streams, and streams that are
// not keyed, pass through.
func (e *engine) interceptStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, name := ss.Context(), info.FullMethod
	m := e.method(name, nil)
	if m.err == nil && m.requestType == nil && m.mode != ModeDisabled {
		m = e.unknownStream(name, info, m)
	}
	bidiCall := info.IsClientStream && info.IsServerStream
	if m.mode == ModeDisabled || (m.err == nil && (bidiCall || m.requestType == nil)) {
		return passThroughStream(srv, ss, handler, nil, 0)
	}
	if m.err != nil {
		return e.fail(ctx, methodSubject(name, m), m.err, 0)
	}
	if len(metadata.ValueFromIncomingContext(ctx, e.cfg.metadataKey)) == 0 && m.keyField == nil {
		// No key, and no request to read one from: not read ahead.
		if m.mode == ModeRequired {
			return e.fail(ctx, methodSubject(name, m), e.keyMissing(), 0)
		}
		return passThroughStream(srv, ss, handler, nil, 0)
	}
	resume, err := e.resumeAfter(ctx, info)
	if err != nil {
		return e.fail(ctx, methodSubject(name, m), err, 0)
	}
	reqs, err := e.receive(ss, m.requestType)
	if err != nil {
		return e.fail(ctx, methodSubject(name, m), err, 0)
	}
	var first proto.Message
	if len(reqs) > 0 {
		first = reqs[0]
	}
	key, err := e.clientKey(ctx, m, first)
	if err == nil && key == "" && m.mode == ModeRequired {
		err = e.keyMissing()
	}
	if err != nil {
		return e.fail(ctx, methodSubject(name, m), err, 0)
	}
	if key == "" { // an OPTIONAL method whose key field is empty
		return passThroughStream(srv, ss, handler, reqs, 0)
	}
	s := &streamCall{srv: srv, ss: ss, handler: handler, serverStream: info.IsServerStream, reqs: reqs, resume: resume}
	s.t, s.reply = s, methodReply(e.cfg.files, m)
	if s.serverStream {
		s.sent.typ, s.sent.limit = string(m.responseType.Descriptor().FullName()), e.cfg.maxResponseBytes
	}
	if err := e.prepare(ctx, &s.call, name, m.namespace, m, key, reqs...); err != nil {
		return e.fail(ctx, methodSubject(name, m), err, 0)
	}
	resp, err := e.run(ctx, &s.call)
	return s.answer(ctx, resp, err)
}

// unknownStream returns the policy of a keyed streaming method that the
// descriptor registry does not have, whose requests cannot be read: a
// configuration error when WithMethodPolicy names it or its mode is
// REQUIRED, so that it never passes through unnoticed; else m, which
// passes through.
func (e *engine) unknownStream(name string, info *grpc.StreamServerInfo, m *methodConfig) *methodConfig {
	if _, named := e.cfg.methods[name]; !named && m.mode != ModeRequired {
		return m
	}
	failed := *m
	failed.err = &MethodConfigError{Method: name, Problem: unknownStreamProblem(info.IsClientStream, info.IsServerStream)}
	return &failed
}

func (e *engine) keyMissing() error {
	return &KeyError{Err: ErrKeyMissing, Detail: "send it in the " + strconv.Quote(e.cfg.metadataKey) + " metadata"}
}

// resumeAfter returns the number of messages a retry of a server-streaming
// call already has ([ResumeAfterKey]), 0 when it does not say. Other calls
// do not read it.
func (e *engine) resumeAfter(ctx context.Context, info *grpc.StreamServerInfo) (int, error) {
	vals := metadata.ValueFromIncomingContext(ctx, ResumeAfterKey)
	if !info.IsServerStream || len(vals) == 0 {
		return 0, nil
	}
	if len(vals) > 1 {
		return 0, fmt.Errorf("%w: more than one %s", ErrResumeInvalid, ResumeAfterKey)
	}
	n, err := strconv.ParseUint(vals[0], 10, 31)
	if err != nil {
		return 0, fmt.Errorf("%w: %s must be a non-negative decimal integer below 2^31", ErrResumeInvalid, ResumeAfterKey)
	}
	return int(n), nil
}

// withoutResume returns ctx without [ResumeAfterKey] in its incoming
// metadata. The interceptor that answers a server stream honours the
// resume point and consumes it: the handler, and an idempotency
// interceptor nested inside this one, see a call that starts at its first
// message, so the messages the caller has are skipped once.
func withoutResume(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx) // a copy, its keys in lower case
	if !ok {
		return ctx
	}
	delete(md, ResumeAfterKey)
	return metadata.NewIncomingContext(ctx, md)
}

// frameHeader is the size of a gRPC message's frame header, counted
// against [WithMaxStreamRequestBytes] with each message.
const frameHeader = 5

// receive reads a keyed stream's requests into messages of type mt, up to
// the end of the stream or the size bound ([WithMaxStreamRequestBytes]).
func (e *engine) receive(ss grpc.ServerStream, mt protoreflect.MessageType) ([]proto.Message, error) {
	var reqs []proto.Message
	size := 0
	for {
		msg := mt.New().Interface()
		err := ss.RecvMsg(msg)
		if errors.Is(err, io.EOF) {
			return reqs, nil
		}
		if err != nil {
			return nil, err
		}
		if size += proto.Size(msg) + frameHeader; size > e.cfg.maxStreamRequest {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrStreamTooLarge, e.cfg.maxStreamRequest)
		}
		reqs = append(reqs, msg)
	}
}

// passThroughStream runs a stream handler without a claim, as it is,
// except that its header and trailer cannot carry the replay marker; reqs,
// when not nil, are the requests already read, which the handler receives
// first. A keyed server stream (failing open, or nested in the call that
// holds the claim) does not send its first skip messages, which the
// resuming caller has, and its handler does not see the resume point
// ([withoutResume]).
func passThroughStream(srv any, ss grpc.ServerStream, handler grpc.StreamHandler, reqs []proto.Message, skip int) error {
	ctx := ss.Context()
	if skip > 0 {
		ctx = withoutResume(ctx)
	}
	if st := grpc.ServerTransportStreamFromContext(ctx); st != nil {
		ctx = grpc.NewContextWithServerTransportStream(ctx, &markerGuard{st})
	}
	return handler(srv, &handlerStream{ServerStream: ss, ctx: ctx, reqs: reqs, buffered: reqs != nil, skip: skip})
}
