package idempotency

import (
	"cmp"
	"errors"
	"maps"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-idempotency/idempotency/internal/policy"
)

// ServiceInfoProvider is what [Server.Validate] needs of a gRPC server:
// the services it serves. *grpc.Server implements it, as does grpc-go's
// reflection.ServiceInfoProvider.
type ServiceInfoProvider interface {
	GetServiceInfo() map[string]grpc.ServiceInfo
}

// Validate checks the idempotency policy of every method srv serves, as
// s's interceptors resolve it, and returns one [*MethodConfigError] per
// method whose policy cannot work (joined with errors.Join), or nil. It
// also reports a [WithMethodPolicy] for a method srv does not serve, a
// KeyField it cannot check, and, when [Server.StreamServerInterceptor] has
// not been called, every streaming method that takes part. Call it once
// the services are registered and the interceptors built, before Serve.
// See [the proto guide].
//
// [the proto guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/proto.md#checking-a-server-at-start-up
func (s *Server) Validate(srv ServiceInfoProvider) error {
	cfg := s.e.cfg
	services := srv.GetServiceInfo()
	served := make(map[string]bool)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(services)) {
		info := services[name]
		file, _ := info.Metadata.(string) // the proto file, in generated code
		methods := slices.SortedFunc(slices.Values(info.Methods), func(a, b grpc.MethodInfo) int {
			return cmp.Compare(a.Name, b.Name)
		})
		for _, mi := range methods {
			full := "/" + name + "/" + mi.Name
			served[full] = true
			if err := cfg.checkServed(full, mi, file, s.streams.Load()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.methods)) {
		if !served[name] {
			errs = append(errs, &MethodConfigError{Method: name, File: cfg.fileOf(name),
				Problem: "WithMethodPolicy names a method the server does not serve"})
		}
	}
	return errors.Join(errs...)
}

// checkServed checks the policy of one method a server serves, mi; file
// is the proto file the server names for it, used when the descriptor
// registry does not have the method; streams says whether the server has
// the stream interceptor.
func (c *config) checkServed(fullMethod string, mi grpc.MethodInfo, file string, streams bool) error {
	md := policy.FindMethod(c.files, fullMethod)
	if md == nil {
		if _, ok := c.methods[fullMethod]; !ok {
			return nil // no descriptor, no code policy: OPTIONAL, nothing to check
		}
		if mi.IsClientStream || mi.IsServerStream {
			return &MethodConfigError{Method: fullMethod, File: file,
				Problem: unknownStreamProblem(mi.IsClientStream, mi.IsServerStream)}
		}
	}
	var req protoreflect.MessageDescriptor
	if md != nil {
		req = md.Input()
	}
	m, err := c.policyOf(fullMethod, md, req)
	if err == nil && !streams && mi.IsClientStream != mi.IsServerStream && m.mode != ModeDisabled && c.annotated(fullMethod, md) {
		err = &MethodConfigError{Method: fullMethod, File: file, Problem: problemNoStreamInterceptor}
	}
	var ce *MethodConfigError
	if errors.As(err, &ce) && ce.File == "" {
		ce.File = file
	}
	return err
}

// problemNoStreamInterceptor: a policy on a streaming method of a server
// that does not intercept streams would be silently ignored.
const problemNoStreamInterceptor = "annotated streaming method, but the server has no stream interceptor (Server.StreamServerInterceptor)"

// annotated reports whether an idempotency.v1.method option (md, nil when
// the registry does not have the method) or [WithMethodPolicy] gives
// fullMethod a policy.
func (c *config) annotated(fullMethod string, md protoreflect.MethodDescriptor) bool {
	if _, named := c.methods[fullMethod]; named {
		return true
	}
	return md != nil && policy.FromDescriptor(md).Annotated
}

// validateMethods checks, at construction, the policy of every method
// named by [WithMethodPolicy] that the descriptor registry has, so that a
// mistyped KeyField panics at start-up. A method the registry does not have
// is resolved, and its KeyField checked against the request, on its first
// call.
func (c *config) validateMethods() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.methods)) {
		md := policy.FindMethod(c.files, name)
		if md == nil {
			continue
		}
		if _, err := c.policyOf(name, md, md.Input()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fileOf returns the proto file that declares fullMethod, or "".
func (c *config) fileOf(fullMethod string) string {
	if md := policy.FindMethod(c.files, fullMethod); md != nil {
		return md.ParentFile().Path()
	}
	return ""
}
