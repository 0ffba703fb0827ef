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
		{"missing", &idempotency.KeyError{Reason: idempotency.ReasonKeyMissing, Detail: "x"}, http.StatusBadRequest, 0},
		{"invalid", idempotency.ValidateKey(""), http.StatusBadRequest, 0},
		{"in use", idempotency.ErrKeyInUse, http.StatusConflict, idempotency.DefaultRetryAfter},
		{"reused, wrapped", fmt.Errorf("op: %w", idempotency.ErrKeyReused), http.StatusUnprocessableEntity, 0},
		{"unavailable", idempotency.ErrStoreUnavailable, http.StatusServiceUnavailable, idempotency.DefaultRetryAfter},
		{"full", idempotency.ErrStoreFull, http.StatusServiceUnavailable, idempotency.DefaultRetryAfter},
		{"not retained", idempotency.ErrResponseNotRetained, http.StatusBadRequest, 0},
		{"corrupt", idempotency.ErrRecordCorrupt, http.StatusInternalServerError, 0},
		{"misconfigured", idempotency.ErrMisconfigured, http.StatusInternalServerError, 0},
		{"request too large", httpidempotency.ErrRequestTooLarge, http.StatusRequestEntityTooLarge, 0},
		{"not the library's", errors.New("boom"), http.StatusInternalServerError, 0},
		{"gRPC status with RetryInfo", grpcStatus(codes.Aborted, idempotency.ReasonKeyInUse, 1500*time.Millisecond), http.StatusConflict, 1500 * time.Millisecond},
		{"gRPC status with RetryInfo 0", grpcStatus(codes.ResourceExhausted, idempotency.ReasonStoreFull, 0), http.StatusServiceUnavailable, 0},
		{"gRPC status without ErrorInfo", status.Error(codes.Aborted, "x"), http.StatusInternalServerError, 0},
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
