// Package policy resolves a method's idempotency policy from its registered
// proto descriptors, once per method.
package policy

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	idempotencyv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/v1"
)

// Policy is what the descriptors say about one method.
type Policy struct {
	// Mode is MODE_OPTIONAL, MODE_REQUIRED or MODE_DISABLED, never
	// MODE_UNSPECIFIED. NO_SIDE_EFFECTS methods resolve to MODE_DISABLED.
	Mode idempotencyv1.Mode
	// Retention and Lease are zero when the descriptor does not set them.
	Retention, Lease time.Duration
	// KeyField is the field name key_field gives, or "". It is a name, not
	// a field: the caller resolves it with [KeyField] on the descriptor of
	// the request it will read, which need not be the registry's.
	KeyField string
	// Namespace is the namespace the option gives, or "".
	Namespace string
	// Abandoned is the abandoned option, ABANDON_POLICY_UNSPECIFIED when
	// the option does not give one; it may be a value this version does
	// not know (from a newer options.proto): the caller checks it.
	Abandoned idempotencyv1.AbandonPolicy
	// Annotated reports whether the method has the idempotency.v1.method
	// option.
	Annotated bool
	// Explicit reports whether the descriptor gives the mode: the method
	// has the idempotency.v1.method option or idempotency_level
	// NO_SIDE_EFFECTS. When it is false, Mode is MODE_OPTIONAL and callers
	// apply their own default mode instead.
	Explicit bool
}

// Resolve returns the policy of fullMethod ("/pkg.Service/Method") from
// protoregistry.GlobalFiles: MODE_OPTIONAL when it does not have the
// method. Callers cache the result per method.
func Resolve(fullMethod string) Policy {
	md := FindMethod(protoregistry.GlobalFiles, fullMethod)
	if md == nil {
		return Policy{Mode: idempotencyv1.Mode_MODE_OPTIONAL}
	}
	return FromDescriptor(md)
}

// FindMethod returns the descriptor of fullMethod ("/pkg.Service/Method"), or
// nil when files does not have it.
func FindMethod(files *protoregistry.Files, fullMethod string) protoreflect.MethodDescriptor {
	name := strings.Replace(strings.TrimPrefix(fullMethod, "/"), "/", ".", 1)
	d, err := files.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		return nil
	}
	md, _ := d.(protoreflect.MethodDescriptor)
	return md
}

// Option returns the idempotency.v1.method option of md, or nil.
func Option(md protoreflect.MethodDescriptor) *idempotencyv1.MethodPolicy {
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok || opts == nil || !proto.HasExtension(opts, idempotencyv1.E_Method) {
		return nil
	}
	mp, _ := proto.GetExtension(opts, idempotencyv1.E_Method).(*idempotencyv1.MethodPolicy)
	return mp
}

// FromDescriptor reads the policy of one method descriptor. It checks
// nothing: see [Streaming] and [KeyField].
func FromDescriptor(md protoreflect.MethodDescriptor) Policy {
	p := Policy{Mode: idempotencyv1.Mode_MODE_OPTIONAL}
	if mp := Option(md); mp != nil {
		p.Annotated = true
		if mp.GetMode() != idempotencyv1.Mode_MODE_UNSPECIFIED {
			p.Mode = mp.GetMode()
		}
		p.Retention = mp.GetRetention().AsDuration()
		p.Lease = mp.GetLease().AsDuration()
		p.KeyField = mp.GetKeyField()
		p.Namespace = mp.GetNamespace()
		p.Abandoned = mp.GetAbandoned()
	}
	if opts, ok := md.Options().(*descriptorpb.MethodOptions); ok &&
		opts.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
		p.Mode = idempotencyv1.Mode_MODE_DISABLED
	}
	p.Explicit = p.Annotated || p.Mode == idempotencyv1.Mode_MODE_DISABLED
	return p
}

// Infrastructure reports whether fullMethod ("/pkg.Service/Method") belongs
// to one of gRPC's own services: a service whose proto package is "grpc"
// or starts with "grpc." (health, reflection v1 and v1alpha, channelz, lb,
// the ALTS handshaker, grpc.testing). A service name has no dots, so that
// is a method name that starts with "/grpc.". The library's own admin
// service (package idempotency.admin.v1) is one too: an operator's lookup
// or purge is not a side effect to deduplicate. The interceptors leave
// these methods alone unless the server names one with WithMethodPolicy.
func Infrastructure(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.") || strings.HasPrefix(fullMethod, adminPrefix)
}

// adminPrefix begins the full method names of the admin service's package,
// idempotency.admin.v1.
const adminPrefix = "/idempotency.admin."

// Streaming reports whether md streams in either direction.
func Streaming(md protoreflect.MethodDescriptor) bool {
	return md.IsStreamingClient() || md.IsStreamingServer()
}

// KeyField returns the field of msg called name when it is a singular
// string field (the only kind a key can be read from), and otherwise an
// error that says why not.
func KeyField(msg protoreflect.MessageDescriptor, name string) (protoreflect.FieldDescriptor, error) {
	f := msg.Fields().ByName(protoreflect.Name(name))
	switch {
	case f == nil:
		return nil, fmt.Errorf("%q names no field of %s", name, msg.FullName())
	case f.Kind() != protoreflect.StringKind || f.Cardinality() == protoreflect.Repeated:
		return nil, fmt.Errorf("%q is not a singular string field of %s", name, msg.FullName())
	}
	return f, nil
}
