package idempotency

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/emptypb"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
)

// Do runs fn once per (op, key, scope) across every process that shares
// s's store, for work that is not a gRPC handler. An op that is empty or
// starts with "/", as only a gRPC method's name does, is refused with the
// error of [ValidateOperation] and runs nothing. The first call runs fn
// and stores its response or deterministic error ([WithStoredCodes]);
// every later call with the key gets them back, with replayed true. Any
// other error, or a panic, releases the claim. The same key with another
// req is [ErrKeyReused]; fn runs on a claimed handler's context, detached
// from ctx. Do's own errors are the library's sentinels, wrapped. The rest
// (op, Resp, nested calls, every error) is in [the functions guide].
//
// [the functions guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/functions.md#do
func Do[Resp proto.Message](ctx context.Context, s *Server, op, key string, req proto.Message, fn func(ctx context.Context) (Resp, error)) (resp Resp, replayed bool, err error) {
	return do(ctx, s, op, key, req, fn, false)
}

// do is [Do]; once says that any response a RecoverFunc returns without
// an error completes the key ([Once]).
func do[Resp proto.Message](ctx context.Context, s *Server, op, key string, req proto.Message, fn func(ctx context.Context) (Resp, error), once bool) (resp Resp, replayed bool, err error) {
	// A record of another message is another operation's, or another
	// Resp's under op: a mistake, unless the message was renamed since.
	f := &fnCall[Resp]{fn: fn, req: req, once: once, reply: reply{mt: respType[Resp](), files: s.e.cfg.files, others: unknownName}}
	f.t = f
	out, err := s.e.do(ctx, &f.call, op, key, req)
	if out != nil {
		var ok bool
		if resp, ok = out.(Resp); !ok {
			resp, err = asResp[Resp](s.e.cfg.files, &f.call.record, out)
		}
	}
	return resp, f.isReplay, err
}

// asResp returns the response a replay decoded into out as a Resp: a
// dynamic message of out's type when Resp is one (a replay decodes into
// the generated type whenever it is linked in), decoded from the record's
// bytes again. Any other Resp that out is not is a corrupt record.
func asResp[Resp proto.Message](files *protoregistry.Files, rec *recordv1.Record, out any) (resp Resp, err error) {
	msg, isMsg := out.(proto.Message)
	if _, dynamic := any(resp).(*dynamicpb.Message); !dynamic || !isMsg {
		return resp, fmt.Errorf("%w: the record holds a %T, not a %T", ErrRecordCorrupt, out, resp)
	}
	md := msg.ProtoReflect().Descriptor()
	if d, err := files.FindDescriptorByName(md.FullName()); err == nil {
		if fd, ok := d.(protoreflect.MessageDescriptor); ok {
			md = fd // the descriptor the caller's dynamic messages are built on
		}
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(rec.GetResponse(), m); err != nil {
		return resp, fmt.Errorf("%w: response of type %q: %w", ErrRecordCorrupt, md.FullName(), err)
	}
	return any(m).(Resp), nil
}

// Once runs fn once per (op, key, scope) across every process that shares
// s's store, for work whose only result is that it was done: ran reports
// whether this call ran fn. A later call with the key returns ran false
// and nil, or fn's stored deterministic error. Once is [Do] with an empty
// response (so Once and Do[*emptypb.Empty] on one op share outcomes), and
// everything Do says of op, req, fn's context and its errors holds.
//
// Under [AbandonRecover] ([WithOperationPolicy]), a RecoverFunc that
// returns without an error, whatever its response (nil too), completes
// the key: the work was done. ran is then false, since fn did not run;
// it is true when the recovery asked for fn to run ([ErrRerun]).
func Once(ctx context.Context, s *Server, op, key string, req proto.Message, fn func(ctx context.Context) error) (ran bool, err error) {
	_, _, err = do(ctx, s, op, key, req, func(ctx context.Context) (*emptypb.Empty, error) {
		ran = true
		return &emptypb.Empty{}, fn(ctx)
	}, true)
	return ran, err
}

// do checks op and key, and runs c under op's policy; it reports the
// engine's own errors to the observer.
func (e *engine) do(ctx context.Context, c *call, op, key string, req proto.Message) (any, error) {
	if err := ValidateOperation(op); err != nil {
		return nil, fmt.Errorf("Do and Once: %w", err)
	}
	err := ValidateKey(key)
	if key == "" {
		err = &KeyError{Err: ErrKeyMissing, Detail: "Do and Once need a key"}
	}
	if req == nil {
		req = &emptypb.Empty{}
	}
	m, ok := e.ops[op]
	if !ok {
		m = e.otherOp
	}
	if err == nil {
		err = e.prepare(ctx, c, op, op, m, key, req)
	}
	if hf, ok := err.(*hookFailure); ok { //nolint:errorlint // the engine returns its *hookFailure unwrapped
		// The caller's own function failed: its error, wrapped.
		return nil, (*hookError)(hf)
	}
	if err != nil {
		e.report(ctx, &subject{method: op, op: op}, err, 0)
		return nil, err
	}
	c.ownRequest = true
	out, err := e.run(ctx, c)
	if err != nil {
		e.report(ctx, &c.subject, err, c.storeTime)
	}
	return out, err
}

// respType returns the message type of Resp, or nil when Resp does not
// have one of its own (an interface, or dynamicpb): a replay then decodes
// into the type the record names.
func respType[Resp proto.Message]() protoreflect.MessageType {
	var zero Resp
	if _, dynamic := any(zero).(*dynamicpb.Message); dynamic || any(zero) == nil {
		return nil
	}
	return zero.ProtoReflect().Type()
}

// fnCall is a call of [Do]: the function, with nothing to capture or
// replay besides its result. It is Do's [transport]: its outcome is one
// response or a stored error ([reply]).
type fnCall[Resp proto.Message] struct {
	call
	fn    func(ctx context.Context) (Resp, error)
	req   proto.Message // nil: an empty message
	once  bool          // a call of Once: any recovered response is its empty one
	reply reply
}

func (f *fnCall[Resp]) bypass(ctx context.Context) (any, error) { return f.run(ctx) }

// run runs the function. A nil response of a generated type is its
// empty message, as a replay decodes the bytes stored for it, and as gRPC
// sends a handler's; a nil response of no known type (a nil
// *dynamicpb.Message, or a nil interface) cannot be stored, and is not
// retained.
func (f *fnCall[Resp]) run(ctx context.Context) (any, error) {
	resp, err := f.fn(ctx)
	if err != nil {
		return nil, err
	}
	return result(resp), nil
}

// result returns resp as the work's result, as [fnCall.run] says.
func result[Resp proto.Message](resp Resp) any {
	if d, dynamic := any(resp).(*dynamicpb.Message); any(resp) == nil || (dynamic && d == nil) {
		return nil
	}
	if m := resp.ProtoReflect(); !m.IsValid() {
		return m.Type().New().Interface()
	}
	return resp
}

func (*fnCall[Resp]) capture(ctx context.Context) context.Context { return ctx }

func (*fnCall[Resp]) record(rec *recordv1.Record, resp any, herr error, buf *[]byte) (int, error) {
	return recordReply(rec, resp, herr, buf)
}

func (f *fnCall[Resp]) replay(_ context.Context, rec *recordv1.Record) (any, error) {
	return f.reply.replay(rec)
}

func (*fnCall[Resp]) txRefused() error { return nil }

func (f *fnCall[Resp]) request() proto.Message {
	if f.req == nil {
		return &emptypb.Empty{}
	}
	return f.req
}

// recovered returns msg as the function's response: a Resp, else an
// error wrapping [ErrMisconfigured] (decision 292); any msg, nil too, is
// Once's empty response.
func (f *fnCall[Resp]) recovered(msg proto.Message) (any, error) {
	if f.once {
		return &emptypb.Empty{}, nil
	}
	resp, ok := msg.(Resp)
	if !ok || msg == nil {
		return nil, errRecoveredType(msg, fmt.Sprintf("%T", resp))
	}
	return result(resp), nil
}

// operations resolves the policy of every operation named by
// [WithOperationPolicy], and the one every other operation shares.
func (c *config) operations() (named map[string]*methodConfig, other *methodConfig) {
	build := func(p MethodPolicy) *methodConfig {
		m := c.defaults()
		m.mode = ModeRequired
		m.override(p)
		m.clamp()
		return m
	}
	named = make(map[string]*methodConfig, len(c.ops))
	for op, p := range c.ops {
		named[op] = build(p)
	}
	return named, build(MethodPolicy{})
}

// ValidateOperation returns nil when name can name an operation of [Do]
// and [Once] (or a method's namespace, [MethodPolicy.Namespace]), and
// otherwise an error wrapping [ErrMisconfigured] that says why: name is
// empty, or starts with "/". Only a gRPC method's full name starts with
// "/" ("/payments.v1.Payments/Capture"), and [Server.StoreKey], the admin
// service and idempotencyctl read such a name as the method: work run
// under an operation spelled like one could never be found by its name,
// and a purge by that name would reach the method's entry instead.
//
// [Do] and [Once] return this error for such an operation, and run
// nothing; [WithOperationPolicy], [WithMethodPolicy] (its Namespace),
// httpidempotency's WithOperation and the message consumers' processors
// and options panic with it at construction.
func ValidateOperation(name string) error {
	if p := operationProblem(name); p != "" {
		return fmt.Errorf("%w: %s", ErrMisconfigured, p)
	}
	return nil
}

// operationProblem says why name cannot name an operation, "" when it can.
func operationProblem(name string) string {
	switch {
	case name == "":
		return "an operation name must not be empty"
	case strings.HasPrefix(name, "/"):
		return fmt.Sprintf(`operation %q must not start with "/": a name that starts with "/" is a gRPC method's (Server.StoreKey, the admin service and idempotencyctl read it as the method); name the operation without the slash, "payments.capture" say`, name)
	}
	return ""
}
