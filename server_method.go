package idempotency

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	"github.com/grpc-idempotency/idempotency/internal/policy"
)

// Mode says whether a method takes part in idempotency.
type Mode int

// Modes, as in the idempotency.v1.method proto option.
const (
	// ModeUnspecified keeps the mode the proto option gives (OPTIONAL when
	// it gives none).
	ModeUnspecified Mode = iota
	// ModeOptional deduplicates calls that carry a key and runs calls
	// without one.
	ModeOptional
	// ModeRequired refuses calls without a key with INVALID_ARGUMENT and
	// [ErrKeyMissing].
	ModeRequired
	// ModeDisabled leaves the method untouched.
	ModeDisabled
)

// MethodPolicy is the idempotency policy of one method, set in code with
// [WithMethodPolicy]. Zero fields keep what the method's proto options say.
type MethodPolicy struct {
	// Mode of the method.
	Mode Mode
	// Retention of completed outcomes, kept within 1h and 87600h as
	// [WithRetention]'s; negative panics (see [WithMethodPolicy]).
	Retention time.Duration
	// Lease of in-flight claims, kept within 100ms and 24h as
	// [WithLease]'s; negative panics.
	Lease time.Duration
	// KeyField names a top-level singular string field of the request to
	// read the key from when metadata has none (AIP-155 request_id). A name
	// that is not one is a configuration error (see [WithMethodPolicy]).
	// Default: the proto option's key_field, if any.
	KeyField string
	// Cancellation says whether the method's claimed handler is cancelled
	// with its caller ([WithCallerCancellation]). Default: the server-wide
	// setting.
	Cancellation Cancellation
	// HandlerTimeout bounds the method's claimed handler once its caller
	// has gone ([WithHandlerTimeout]). Default: the server-wide setting;
	// negative panics.
	HandlerTimeout time.Duration
	// Namespace names the method's operation in the store instead of its
	// full name: its keys and fingerprints are derived from the namespace,
	// so renaming the proto package, the service or the method keeps every
	// live key, and a stored response decodes into the renamed response
	// type. Give a name that never changes and that no other method of the
	// store's servers uses, such as "payments.charge"; a method and the
	// function [Do] or [Once] runs under op = Namespace are one operation.
	// A namespace never shares a key with a method without one, and never
	// starts with "/" ([ValidateOperation]): [WithMethodPolicy] panics on
	// one, and a proto option's makes the method misconfigured. Default:
	// the proto option's namespace, if any, else the full method name.
	Namespace string
	// Abandoned says what a call does with a key whose claim was
	// abandoned. Default: the proto option's abandoned, if any, else
	// [WithAbandonedClaims]. A value that is none of the constants
	// panics. [AbandonRecover] on a streaming method cannot work (a
	// recovery answers one response to one request): [NewServer] panics.
	Abandoned AbandonPolicy
	// Recover finds out what an abandoned attempt did, for Abandoned =
	// [AbandonRecover], from here or from the proto option. Required
	// then: [WithMethodPolicy] panics when Abandoned is AbandonRecover
	// without one, and a method whose proto option says
	// ABANDON_POLICY_RECOVER without one is misconfigured. Set beside
	// another Abandoned, it would never run: that panics too.
	Recover RecoverFunc
}

// Cancellation says whether a claimed handler is cancelled when its caller
// cancels or its deadline passes.
type Cancellation int

// Cancellations.
const (
	// CancellationUnspecified keeps the server-wide setting.
	CancellationUnspecified Cancellation = iota
	// CancellationDetached runs the handler on a context detached from its
	// caller's cancellation, bounded by the handler timeout (the default).
	CancellationDetached
	// CancellationCaller cancels the handler with its caller.
	CancellationCaller
)

// methodConfig is the resolved policy of one method, built once per method.
type methodConfig struct {
	mode           Mode
	retention      time.Duration
	lease          time.Duration
	handlerTimeout time.Duration
	followCaller   bool
	namespace      string                       // names the operation in the store instead of the method; "" for none
	keyField       protoreflect.FieldDescriptor // of the request's own descriptor
	responseType   protoreflect.MessageType     // generated, or dynamic over the configured descriptors
	requestType    protoreflect.MessageType     // of a streaming method, which the stream interceptor reads
	abandoned      AbandonPolicy                // never AbandonUnset
	recover        RecoverFunc                  // set when abandoned is AbandonRecover
	// err, a *MethodConfigError, is set when the policy cannot work; every
	// call of the method then fails closed with it.
	err error
}

var modeFromProto = map[idempotencyv1.Mode]Mode{
	idempotencyv1.Mode_MODE_OPTIONAL: ModeOptional,
	idempotencyv1.Mode_MODE_REQUIRED: ModeRequired,
	idempotencyv1.Mode_MODE_DISABLED: ModeDisabled,
}

// method returns the cached policy of fullMethod, resolving it on the first
// call from the descriptors and the options set in code. Concurrent first
// calls may each resolve it; they get the same result and one is kept.
func (e *engine) method(fullMethod string, req any) *methodConfig {
	if m, ok := e.methods.Load(fullMethod); ok {
		return m.(*methodConfig)
	}
	m := e.resolve(fullMethod, req)
	actual, _ := e.methods.LoadOrStore(fullMethod, m)
	return actual.(*methodConfig)
}

func (e *engine) resolve(fullMethod string, req any) *methodConfig {
	md := policy.FindMethod(e.cfg.files, fullMethod)
	var reqType protoreflect.MessageType // of a streaming method's requests
	if md != nil && policy.Streaming(md) {
		reqType = messageType(md.Input())
	}
	var reqDesc protoreflect.MessageDescriptor
	switch msg, ok := req.(proto.Message); {
	case ok:
		// The request's own descriptor, not the registry's: with
		// WithDescriptors the two are different values, and reading a
		// message with another descriptor's field panics.
		reqDesc = msg.ProtoReflect().Descriptor()
	case reqType != nil: // the stream interceptor reads requests into it
		reqDesc = reqType.Descriptor()
	}
	m, err := e.cfg.policyOf(fullMethod, md, reqDesc)
	if err != nil {
		m.err = err
		m.mode = ModeRequired // never DISABLED: the call must reach clientKey and fail
	}
	if md != nil {
		m.responseType = messageType(md.Output())
		m.requestType = reqType
	}
	return m
}

// messageType returns the type a replay decodes a message of descriptor d
// into: the generated type when one is linked in, and otherwise a dynamic
// type over d, so that a server whose messages have no generated Go types
// ([WithDescriptors]) replays them too.
func messageType(d protoreflect.MessageDescriptor) protoreflect.MessageType {
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName()); err == nil {
		return mt
	}
	return dynamicpb.NewMessageType(d)
}

// findMessageType returns the type of the message named name: as
// [messageType] gives it when files has the message, and otherwise the
// generated type, if any.
func findMessageType(files *protoregistry.Files, name protoreflect.FullName) (protoreflect.MessageType, error) {
	if d, err := files.FindDescriptorByName(name); err == nil {
		if md, ok := d.(protoreflect.MessageDescriptor); ok {
			return messageType(md), nil
		}
	}
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

// policyOf merges the proto policy of md (nil when the registry does not
// have the method) with the one set in code, and resolves the key field on
// req, the descriptor of the method's request (nil when not known). The
// error, a *MethodConfigError, says why the policy cannot work: an
// idempotency.v1.method option or a code policy on a bidirectional
// streaming method, an option's mode this version does not know (unless
// the code policy sets a Mode), or a key field that is not a singular
// string field of the request. The key field of a DISABLED method is never read, so it is
// not checked.
func (c *config) policyOf(fullMethod string, md protoreflect.MethodDescriptor, req protoreflect.MessageDescriptor) (*methodConfig, error) {
	m := c.defaults()
	fail := &MethodConfigError{Method: fullMethod}
	var keyField, source string
	given := idempotencyv1.Mode_MODE_UNSPECIFIED // the mode the descriptor gives, if any
	givenAbandon := idempotencyv1.AbandonPolicy_ABANDON_POLICY_UNSPECIFIED
	if md != nil {
		fail.File = md.ParentFile().Path()
		p := policy.FromDescriptor(md)
		if p.Annotated && bidi(md) {
			fail.Problem = problemBidiOption
			return m, fail
		}
		if p.Explicit {
			given = p.Mode
		}
		m.retention = positiveOr(p.Retention, m.retention)
		m.lease = positiveOr(p.Lease, m.lease)
		keyField, source = p.KeyField, "key_field"
		m.namespace = p.Namespace
		if a, ok := abandonFromProto[p.Abandoned]; ok {
			m.abandoned = a
		}
		givenAbandon = p.Abandoned
		if strings.HasPrefix(p.Namespace, "/") {
			fail.Problem = fmt.Sprintf(`idempotency.v1.method namespace %q must not start with "/": a namespace is an operation, and a name that starts with "/" is a gRPC method's (ValidateOperation)`, p.Namespace)
			return m, fail
		}
	}
	_, known := modeFromProto[given]
	unknownMode := given != idempotencyv1.Mode_MODE_UNSPECIFIED && !known
	m.mode = c.baseMode(fullMethod, given)
	_, knownAbandon := abandonFromProto[givenAbandon]
	unknownAbandon := givenAbandon != idempotencyv1.AbandonPolicy_ABANDON_POLICY_UNSPECIFIED && !knownAbandon
	if o, ok := c.methods[fullMethod]; ok {
		if md != nil && bidi(md) {
			fail.Problem = problemBidiPolicy
			return m, fail
		}
		if o.Mode != ModeUnspecified {
			m.mode = o.Mode
			unknownMode = false // the mode set in code is the method's
		}
		if o.Abandoned != AbandonUnset {
			unknownAbandon = false // the policy set in code is the method's
		}
		m.override(o)
		if o.KeyField != "" {
			keyField, source = o.KeyField, "MethodPolicy.KeyField"
		}
	}
	m.clamp()
	if unknownMode {
		fail.Problem = fmt.Sprintf(problemUnknownMode, int32(given))
		return m, fail
	}
	if p := abandonProblem(m, md, unknownAbandon, givenAbandon); p != "" {
		fail.Problem = p
		return m, fail
	}
	if keyField == "" || m.mode == ModeDisabled {
		return m, nil
	}
	if req == nil {
		fail.Problem = fmt.Sprintf("%s %q cannot be checked: the method is not in the descriptor registry", source, keyField)
		return m, fail
	}
	f, err := policy.KeyField(req, keyField)
	if err != nil {
		fail.Problem = source + " " + err.Error()
		return m, fail
	}
	m.keyField = f
	return m, nil
}

// Why a policy on a bidirectional streaming method cannot work: its
// requests and responses interleave, so there is no request to fingerprint
// before the handler runs and no one outcome to replay.
const (
	problemBidiOption = "idempotency.v1.method option on a bidirectional streaming method; it applies to unary, client-streaming and server-streaming methods"
	problemBidiPolicy = "WithMethodPolicy names a bidirectional streaming method; it applies to unary, client-streaming and server-streaming methods"
	// A mode this version does not know, from a newer options.proto, may
	// ask for more than OPTIONAL gives, so the method is not run as
	// OPTIONAL: it fails closed until a mode is set in code.
	problemUnknownMode = "idempotency.v1.method mode %d is none this version knows (MODE_OPTIONAL, MODE_REQUIRED, MODE_DISABLED); set the method's Mode with WithMethodPolicy, or upgrade"
	// A stream's requests are read before its handler runs, into the
	// request type the descriptor registry gives.
	problemStreamUnknown = "WithMethodPolicy names a streaming method the descriptor registry does not have (see WithDescriptors): its requests cannot be read"
)

// unknownStreamProblem says why a streaming method that the descriptor
// registry does not have cannot take part: a bidirectional one never can,
// and the requests of the others cannot be read.
func unknownStreamProblem(clientStream, serverStream bool) string {
	if clientStream && serverStream {
		return problemBidiPolicy
	}
	return problemStreamUnknown
}

// bidi reports whether md streams both ways.
func bidi(md protoreflect.MethodDescriptor) bool {
	return md.IsStreamingClient() && md.IsStreamingServer()
}

// defaults returns the server-wide policy, before a method's or an
// operation's own applies.
func (c *config) defaults() *methodConfig {
	return &methodConfig{retention: c.retention, lease: c.lease, abandoned: c.abandoned,
		handlerTimeout: c.handlerTimeout, followCaller: c.cancellation == CancellationCaller}
}

// abandonProblem says why the abandon policy of m, a method of descriptor
// md (nil when not known), cannot work, "" when it can: the proto option
// gives a policy this version does not know (unknown, given) and no code
// policy sets one, or the policy is [AbandonRecover] without a
// [RecoverFunc] or on a streaming method (decision 295). A DISABLED
// method has no claims to abandon.
func abandonProblem(m *methodConfig, md protoreflect.MethodDescriptor, unknown bool, given idempotencyv1.AbandonPolicy) string {
	switch {
	case m.mode == ModeDisabled:
		return ""
	case unknown:
		return fmt.Sprintf(problemUnknownAbandon, int32(given))
	case m.abandoned != AbandonRecover:
		return ""
	case md != nil && policy.Streaming(md):
		return problemStreamRecover
	case m.recover == nil:
		return problemNoRecover
	}
	return ""
}

// override applies the fields of a policy set in code that are shared by
// methods and operations; Mode and KeyField are the caller's.
func (m *methodConfig) override(o MethodPolicy) {
	m.retention = positiveOr(o.Retention, m.retention)
	m.lease = positiveOr(o.Lease, m.lease)
	m.handlerTimeout = positiveOr(o.HandlerTimeout, m.handlerTimeout)
	if o.Cancellation != CancellationUnspecified {
		m.followCaller = o.Cancellation == CancellationCaller
	}
	if o.Namespace != "" {
		m.namespace = o.Namespace
	}
	if o.Abandoned != AbandonUnset {
		m.abandoned = o.Abandoned
	}
	if o.Recover != nil {
		m.recover = o.Recover
	}
}

// clamp brings the retention and the lease within their bounds.
func (m *methodConfig) clamp() {
	m.retention = min(max(m.retention, minRetention), maxRetention)
	m.lease = min(max(m.lease, minLease), maxLease)
}

// baseMode returns the mode of fullMethod before its code policy applies:
// ModeDisabled for a method of gRPC's own services that WithMethodPolicy
// does not name; else the mode its descriptor gives (given, or
// MODE_UNSPECIFIED when it gives none); else ModeOptional for a method
// named by WithMethodPolicy, as for an annotated one; else the default
// mode ([WithDefaultMode]).
func (c *config) baseMode(fullMethod string, given idempotencyv1.Mode) Mode {
	_, named := c.methods[fullMethod]
	switch {
	case !named && policy.Infrastructure(fullMethod):
		return ModeDisabled
	case given != idempotencyv1.Mode_MODE_UNSPECIFIED:
		return modeFromProto[given]
	case named:
		return ModeOptional
	}
	return c.defaultMode
}

// positiveOr returns d when it is set (positive), and otherwise def.
func positiveOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
