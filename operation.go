package idempotency

import (
	"fmt"
	"strings"
)

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
