package idempotency

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
	"github.com/grpc-idempotency/idempotency/internal/policy"
)

// clientMethod is what the client interceptor knows of one method,
// resolved from protoregistry.GlobalFiles on its first call.
type clientMethod struct {
	// keyed says whether its calls get a key (and retries).
	keyed bool
	// keyField is the field its key_field names, on the descriptor of the
	// first request; nil when it names none, or not a singular string
	// field (the server then fails the method's calls as misconfigured).
	keyField protoreflect.FieldDescriptor
}

// method returns what the interceptor knows of method, resolving it on the
// first call, with req, the first request, for the key field (nil for a
// stream: the request type the descriptor registry gives). Concurrent
// first calls may each resolve it; they get the same result.
func (c *clientInterceptor) method(method string, req any) *clientMethod {
	if m, ok := (*c.methods.Load())[method]; ok {
		return m
	}
	m := c.resolve(method, req)
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.methods.Load()
	if prev, ok := old[method]; ok {
		return prev
	}
	next := make(map[string]*clientMethod, len(old)+1)
	for name, v := range old {
		next[name] = v
	}
	next[method] = m
	c.methods.Store(&next)
	return m
}

// resolve reads the policy of method: no key for gRPC's own services, for
// methods whose descriptor says NO_SIDE_EFFECTS or MODE_DISABLED, and, with
// WithDefaultMode(ModeDisabled), for methods whose descriptor gives
// no mode.
func (c *clientInterceptor) resolve(method string, req any) *clientMethod {
	if policy.Infrastructure(method) {
		return &clientMethod{}
	}
	p := policy.Resolve(method)
	m := &clientMethod{keyed: p.Mode != idempotencyv1.Mode_MODE_DISABLED}
	if !p.Explicit {
		m.keyed = c.cfg.defaultMode != ModeDisabled
	}
	if !m.keyed || p.KeyField == "" {
		return m
	}
	var desc protoreflect.MessageDescriptor
	if msg, ok := req.(proto.Message); ok {
		desc = msg.ProtoReflect().Descriptor()
	} else if md := policy.FindMethod(protoregistry.GlobalFiles, method); md != nil {
		desc = md.Input() // a stream, resolved before its first request
	}
	if desc != nil {
		m.keyField, _ = policy.KeyField(desc, p.KeyField)
	}
	return m
}

// fieldKey returns the value of the method's key field in req, or "" when
// it has none. A request whose descriptor is not the one the field was
// resolved on (dynamic messages built from another copy of the
// descriptors) has none, so reading it can never panic.
func (m *clientMethod) fieldKey(req any) string {
	if m.keyField == nil {
		return ""
	}
	msg, ok := req.(proto.Message)
	if !ok {
		return ""
	}
	r := msg.ProtoReflect()
	if r.Descriptor() != m.keyField.ContainingMessage() {
		return ""
	}
	return r.Get(m.keyField).String()
}
