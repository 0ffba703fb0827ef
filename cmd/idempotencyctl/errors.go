package main

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// callError returns the error of a call to cn that failed with err, and
// its exit code: the admin service's status (in process as over gRPC)
// with what it means for the operator.
func callError(cn *conn, err error) error {
	st := status.Convert(err)
	msg := escape(st.Message())
	switch st.Code() {
	case codes.NotFound:
		return &codedError{code: exitNotFound, err: fmt.Errorf("not found: %s", msg)}
	case codes.FailedPrecondition, codes.Aborted:
		return &codedError{code: exitRefused, err: fmt.Errorf("refused: %s", msg)}
	case codes.PermissionDenied:
		return &codedError{code: exitDenied, err: fmt.Errorf("permission denied by %s: %s (send the credentials its authorization function reads with --header key=value)", cn.where, msg)}
	case codes.Unauthenticated:
		return &codedError{code: exitDenied, err: fmt.Errorf("not authenticated by %s: %s (send the credentials its authorization function reads with --header key=value)", cn.where, msg)}
	case codes.InvalidArgument:
		return &codedError{code: exitUsage, err: fmt.Errorf("invalid argument: %s", msg)}
	case codes.Unimplemented:
		if !cn.direct {
			return failure("%s does not serve idempotency.admin.v1.AdminService, or its store cannot be inspected: %s", cn.where, msg)
		}
	case codes.Unavailable:
		if cn.direct {
			return failure("%s is unavailable: the log line above says why", cn.where)
		}
		return failure("%s is unavailable: %s", cn.where, msg)
	case codes.DeadlineExceeded:
		return failure("%s did not answer within --timeout: %s", cn.where, msg)
	}
	return failure("%s: %s: %s", cn.where, st.Code(), msg)
}
