package httpidempotency_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

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
			if strings.Contains(r.Body, "10.0.0.7") {
				t.Errorf("the problem carries the scope error's text: %s", r.Body)
			}
			if got := r.Header.Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			e.wantRuns(t, 0)
			if n := len(e.store.Calls()); n != 0 {
				t.Errorf("%d store calls, want none", n)
			}
		})
	}
}

// A keyed body over the bound of an http.MaxBytesHandler in front is
// 413, as over the middleware's own bound: nothing is claimed.
func TestMaxBytesHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{outer: func(next http.Handler) http.Handler { return http.MaxBytesHandler(next, 8) }})
	wantProblem(t, e.post(t, "/orders", "123456789", "k"), http.StatusRequestEntityTooLarge, "")
	if n := len(e.store.Calls()); n != 0 {
		t.Errorf("%d store calls, want none", n)
	}
	if r := e.post(t, "/orders", "12345678", "k"); r.Status != http.StatusCreated {
		t.Fatalf("within the bound: %d %s", r.Status, r.Body)
	}
	e.wantRuns(t, 1)
}

// The Retry-After of a 409 (key in flight) and of a 503 (store down) is
// the server's WithRetryAfter, in whole seconds rounded up.
func TestRetryAfterFromServer(t *testing.T) {
	t.Parallel()
	// held is a handler held until release is closed; started says it runs.
	type held struct{ started, release chan struct{} }
	tests := []struct {
		name   string
		call   func(t *testing.T, e *env, h held) response
		status int
		reason string
	}{
		{"key in flight", func(t *testing.T, e *env, h held) response {
			first := make(chan response, 1)
			go func() { first <- e.post(t, "/orders", "{}", "k") }()
			<-h.started
			r := e.post(t, "/orders", "{}", "k")
			close(h.release)
			<-first
			return r
		}, http.StatusConflict, idempotency.ErrKeyInUse.Reason},
		{"store down", func(t *testing.T, e *env, h held) response {
			close(h.release)
			e.store.Down.Store(true)
			return e.post(t, "/orders", "{}", "k")
		}, http.StatusServiceUnavailable, idempotency.ErrStoreUnavailable.Reason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := held{started: make(chan struct{}, 1), release: make(chan struct{})}
			t.Cleanup(func() { // before the server closes: release a handler still held
				select {
				case <-h.release:
				default:
					close(h.release)
				}
			})
			e := newEnv(t, setup{
				handler: func(w http.ResponseWriter, r *http.Request) {
					h.started <- struct{}{}
					<-h.release
					created(w, r)
				},
				server: []idempotency.ServerOption{idempotency.WithRetryAfter(2500 * time.Millisecond)},
			})
			r := tt.call(t, e, h)
			wantProblem(t, r, tt.status, tt.reason)
			if got := r.Header.Get("Retry-After"); got != "3" {
				t.Errorf("Retry-After %q, want 3 (WithRetryAfter 2.5s, rounded up)", got)
			}
		})
	}
}
