package httpidempotency_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
)

// A scope function's error is answered with the HTTP status of its gRPC
// code, as a problem whose detail is the status message; an error that
// is not a status is 500 and says nothing of it. Nothing is claimed and
// the handler does not run.
func TestScopeErrorStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		status     int
		detail     string
		retryAfter string
	}{
		{"unauthenticated", status.Error(codes.Unauthenticated, "sign in first"), http.StatusUnauthorized, "sign in first", ""},
		{"permission denied", status.Error(codes.PermissionDenied, "not your tenant"), http.StatusForbidden, "not your tenant", ""},
		{"unavailable", status.Error(codes.Unavailable, "the directory is down"), http.StatusServiceUnavailable, "the directory is down", "1"},
		{"not a status", errors.New("tenant lookup: dial 10.0.0.7:5432"), http.StatusInternalServerError, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, setup{server: []idempotency.ServerOption{
				idempotency.WithScope(func(context.Context) (string, error) { return "", tt.err }),
			}})
			r := e.post(t, "/orders", "{}", "k")
			p := wantProblem(t, r, tt.status, "")
			if tt.detail != "" && p.Detail != tt.detail {
				t.Errorf("detail %q, want %q", p.Detail, tt.detail)
			}
			if strings.Contains(r.body, "10.0.0.7") {
				t.Errorf("the problem carries the scope error's text: %s", r.body)
			}
			if got := r.header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			e.wantRuns(t, 0)
			if n := len(e.store.Calls()); n != 0 {
				t.Errorf("%d store calls, want none", n)
			}
		})
	}
}
