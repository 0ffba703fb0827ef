package idempotency

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

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
	// [ReasonKeyMissing].
	ModeRequired
	// ModeDisabled leaves the method untouched.
	ModeDisabled
)

// MethodPolicy is the idempotency policy of one method, set in code with
// [WithMethodPolicy]. Zero fields keep what the method's proto options say.
type MethodPolicy struct {
	// Mode of the method.
	Mode Mode
	// Retention of completed outcomes (raised to [MinRetention]).
	Retention time.Duration
	// Lease of in-flight claims.
	Lease time.Duration
	// KeyField names a top-level string field of the request to read the
	// key from when metadata has none (AIP-155 request_id).
	KeyField string
	// Cancellation says whether the method's claimed handler is cancelled
	// with its caller ([WithCallerCancellation]).
	Cancellation Cancellation
	// HandlerTimeout bounds the method's claimed handler once its caller
	// has gone ([WithHandlerTimeout]).
	HandlerTimeout time.Duration
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
	keyField       protoreflect.FieldDescriptor
	responseType   protoreflect.MessageType
}

var modeFromProto = map[idempotencyv1.Mode]Mode{
	idempotencyv1.Mode_MODE_OPTIONAL: ModeOptional,
	idempotencyv1.Mode_MODE_REQUIRED: ModeRequired,
	idempotencyv1.Mode_MODE_DISABLED: ModeDisabled,
}

// method returns the cached policy of fullMethod, resolving it on the first
// call from the descriptors and the options set in code.
func (i *interceptor) method(fullMethod string, req any) *methodConfig {
	if m, ok := i.methods.Load(fullMethod); ok {
		return m.(*methodConfig)
	}
	m := i.resolve(fullMethod, req)
	actual, _ := i.methods.LoadOrStore(fullMethod, m)
	return actual.(*methodConfig)
}

func (i *interceptor) resolve(fullMethod string, req any) *methodConfig {
	m := &methodConfig{mode: ModeOptional, retention: i.cfg.retention, lease: i.cfg.lease,
		handlerTimeout: i.cfg.handlerTimeout, followCaller: i.cfg.cancellation == CancellationCaller}
	md := policy.FindMethod(i.cfg.files, fullMethod)
	if md != nil {
		p := policy.FromDescriptor(md)
		m.mode = modeFromProto[p.Mode]
		if p.Retention > 0 {
			m.retention = p.Retention
		}
		if p.Lease > 0 {
			m.lease = p.Lease
		}
		m.keyField = p.KeyField
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName()); err == nil {
			m.responseType = mt
		}
	}
	if o, ok := i.cfg.methods[fullMethod]; ok {
		if o.Mode != ModeUnspecified {
			m.mode = o.Mode
		}
		if o.Retention > 0 {
			m.retention = o.Retention
		}
		if o.Lease > 0 {
			m.lease = o.Lease
		}
		if o.HandlerTimeout > 0 {
			m.handlerTimeout = o.HandlerTimeout
		}
		if o.Cancellation != CancellationUnspecified {
			m.followCaller = o.Cancellation == CancellationCaller
		}
		if o.KeyField != "" {
			m.keyField = nil
			if msg, ok := req.(proto.Message); ok {
				f := msg.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(o.KeyField))
				if f != nil && f.Kind() == protoreflect.StringKind && !f.IsList() {
					m.keyField = f
				}
			}
		}
	}
	m.retention = max(m.retention, MinRetention)
	m.lease = max(m.lease, MinLease)
	return m
}
