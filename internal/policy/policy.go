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
	// KeyField is the request field named by key_field, or nil.
	KeyField protoreflect.FieldDescriptor
}

// Resolve returns the policy of fullMethod ("/pkg.Service/Method") from
// files (nil means protoregistry.GlobalFiles): MODE_OPTIONAL when files
// does not have the method. Callers cache the result per method.
func Resolve(files *protoregistry.Files, fullMethod string) Policy {
	if files == nil {
		files = protoregistry.GlobalFiles
	}
	md := FindMethod(files, fullMethod)
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

// FromDescriptor reads the policy of one method descriptor.
func FromDescriptor(md protoreflect.MethodDescriptor) Policy {
	p := Policy{Mode: idempotencyv1.Mode_MODE_OPTIONAL}
	if opts, ok := md.Options().(*descriptorpb.MethodOptions); ok &&
		opts.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS {
		p.Mode = idempotencyv1.Mode_MODE_DISABLED
		return p
	}
	mp := Option(md)
	if mp == nil {
		return p
	}
	if mp.GetMode() != idempotencyv1.Mode_MODE_UNSPECIFIED {
		p.Mode = mp.GetMode()
	}
	p.Retention = mp.GetRetention().AsDuration()
	p.Lease = mp.GetLease().AsDuration()
	if name := mp.GetKeyField(); name != "" {
		p.KeyField = md.Input().Fields().ByName(protoreflect.Name(name))
	}
	return p
}

// Validate reports the configuration errors in files: an
// idempotency.v1.method option on a streaming method, or a key_field that
// does not name a singular string field of the request.
func Validate(files *protoregistry.Files) error {
	if files == nil {
		files = protoregistry.GlobalFiles
	}
	var errs []string
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		svcs := fd.Services()
		for i := range svcs.Len() {
			methods := svcs.Get(i).Methods()
			for j := range methods.Len() {
				if err := validateMethod(methods.Get(j)); err != nil {
					errs = append(errs, err.Error())
				}
			}
		}
		return true
	})
	if len(errs) > 0 {
		return fmt.Errorf("idempotency: invalid method options: %s", strings.Join(errs, "; "))
	}
	return nil
}

func validateMethod(md protoreflect.MethodDescriptor) error {
	mp := Option(md)
	if mp == nil {
		return nil
	}
	if md.IsStreamingClient() || md.IsStreamingServer() {
		return fmt.Errorf("%s is a streaming method; idempotency.v1.method applies to unary methods only", md.FullName())
	}
	if name := mp.GetKeyField(); name != "" {
		f := md.Input().Fields().ByName(protoreflect.Name(name))
		if f == nil || f.Kind() != protoreflect.StringKind || f.Cardinality() == protoreflect.Repeated {
			return fmt.Errorf("%s: key_field %q is not a singular string field of %s", md.FullName(), name, md.Input().FullName())
		}
	}
	return nil
}
