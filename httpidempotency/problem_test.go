package httpidempotency_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
)

// defaultRetryAfter is the Retry-After StatusOf gives an error that
// carries none: idempotency.WithRetryAfter's default, 1 s.
const defaultRetryAfter = time.Second

// StatusOf maps the library's errors, as sentinels (wrapped or not) and
// as the interceptor's gRPC statuses, to one status and Retry-After.
func TestStatusOf(t *testing.T) {
	t.Parallel()
	grpcStatus := func(c codes.Code, reason string, delay time.Duration) error {
		st, err := status.New(c, "message").WithDetails(
			&errdetails.ErrorInfo{Reason: reason, Domain: idempotency.ErrorDomain},
			&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	tests := []struct {
		name       string
		err        error
		status     int
		retryAfter time.Duration
	}{
		{"missing", &idempotency.KeyError{Err: idempotency.ErrKeyMissing, Detail: "x"}, http.StatusBadRequest, 0},
		{"invalid", idempotency.ValidateKey(""), http.StatusBadRequest, 0},
		{"in use", idempotency.ErrKeyInUse, http.StatusConflict, defaultRetryAfter},
		{"reused, wrapped", fmt.Errorf("op: %w", idempotency.ErrKeyReused), http.StatusUnprocessableEntity, 0},
		{"unavailable", idempotency.ErrStoreUnavailable, http.StatusServiceUnavailable, defaultRetryAfter},
		{"full", idempotency.ErrStoreFull, http.StatusServiceUnavailable, defaultRetryAfter},
		{"not retained", idempotency.ErrResponseNotRetained, http.StatusBadRequest, 0},
		{"corrupt", idempotency.ErrRecordCorrupt, http.StatusInternalServerError, 0},
		{"misconfigured", idempotency.ErrMisconfigured, http.StatusInternalServerError, 0},
		{"request too large", httpidempotency.ErrRequestTooLarge, http.StatusRequestEntityTooLarge, 0},
		{"outcome unknown", fmt.Errorf("recovery: %w", idempotency.ErrOutcomeUnknown), http.StatusLocked, 0},
		{"outcome unknown, gRPC status", grpcStatus(codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason, 0), http.StatusLocked, 0},
		{"not the library's", errors.New("boom"), http.StatusInternalServerError, 0},
		{"gRPC status with RetryInfo", grpcStatus(codes.Aborted, idempotency.ErrKeyInUse.Reason, 1500*time.Millisecond), http.StatusConflict, 1500 * time.Millisecond},
		{"gRPC status with RetryInfo 0", grpcStatus(codes.ResourceExhausted, idempotency.ErrStoreFull.Reason, 0), http.StatusServiceUnavailable, 0},
		// Statuses that are not the library's (a scope function's) take
		// their code's status, wrapped or not.
		{"gRPC status without ErrorInfo", status.Error(codes.Aborted, "x"), http.StatusConflict, defaultRetryAfter},
		{"unauthenticated, wrapped", fmt.Errorf("scope: %w", status.Error(codes.Unauthenticated, "x")), http.StatusUnauthorized, 0},
		{"permission denied", status.Error(codes.PermissionDenied, "x"), http.StatusForbidden, 0},
		{"not found", status.Error(codes.NotFound, "x"), http.StatusNotFound, 0},
		{"resource exhausted", status.Error(codes.ResourceExhausted, "x"), http.StatusTooManyRequests, defaultRetryAfter},
		{"cancelled", status.Error(codes.Canceled, "x"), 499, 0},
		{"deadline exceeded", status.Error(codes.DeadlineExceeded, "x"), http.StatusGatewayTimeout, 0},
		{"unavailable", status.Error(codes.Unavailable, "x"), http.StatusServiceUnavailable, defaultRetryAfter},
		{"unimplemented", status.Error(codes.Unimplemented, "x"), http.StatusNotImplemented, 0},
		{"internal", status.Error(codes.Internal, "x"), http.StatusInternalServerError, 0},
		{"unknown", status.Error(codes.Unknown, "x"), http.StatusInternalServerError, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, after := httpidempotency.StatusOf(tt.err)
			if code != tt.status || after != tt.retryAfter {
				t.Fatalf("StatusOf = %d, %v; want %d, %v", code, after, tt.status, tt.retryAfter)
			}
		})
	}
}

// A problem's detail is a status's own message, never the text of the
// errors wrapped around it; a status without one gets the title.
func TestProblemOfWrappedStatus(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		err   error
		title string
		want  string
	}{
		{"wrapped", fmt.Errorf("scope of tenant 42 at 10.0.0.7: %w", status.Error(codes.Unauthenticated, "sign in first")), "Unauthorized", "sign in first"},
		{"no message", status.Error(codes.PermissionDenied, ""), "Forbidden", "Forbidden"},
		{"cancelled", status.Error(codes.Canceled, ""), "Client Closed Request", "Client Closed Request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if p := httpidempotency.ProblemOf(tt.err); p.Title != tt.title || p.Detail != tt.want {
				t.Fatalf("title %q, detail %q; want %q, %q", p.Title, p.Detail, tt.title, tt.want)
			}
		})
	}
}
