package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// hookFailures are the ways the scope and fingerprint functions fail: a
// plain error (a database driver's, say) and a gRPC status with a detail.
var hookFailures = []struct {
	name        string
	scope       bool // the scope function fails; else the fingerprint function
	cause       error
	isStatus    bool
	edgeMessage string // the message the gRPC edge answers a plain error with
}{
	{"scope, plain error", true, errors.New("tenants db: connection refused"), false, "idempotency: resolving the caller's scope failed"},
	{"scope, status", true, statusError(codes.Unauthenticated, "no tenant"), true, ""},
	{"fingerprint, plain error", false, errors.New("fingerprint: unsupported field"), false, "idempotency: computing the request fingerprint failed"},
	{"fingerprint, status", false, statusError(codes.InvalidArgument, "unhashable"), true, "idempotency: computing the request fingerprint failed"},
}

// hookOption returns the option whose function fails with cause.
func hookOption(scope bool, cause error) idempotency.ServerOption {
	if scope {
		return idempotency.WithScope(func(context.Context) (string, error) { return "", cause })
	}
	return idempotency.WithFingerprint(func(string, protoMessage) ([]byte, error) { return nil, cause })
}

// Do returns the error of the scope or the fingerprint function as a Go
// error that wraps it: errors.Is finds the cause, and a gRPC status is
// found by status.FromError and status.Code as the function returned it,
// code, message and details. It is not one of the library's reasons, and
// fn does not run.
func TestDoHookErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range hookFailures {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFnFixture(t, hookOption(tc.scope, tc.cause))
			var runs atomic.Int64
			_, _, err := idempotency.Do(t.Context(), f.srv, "op", "k", &testingv1.DoRequest{}, numbered(&runs, &testingv1.DoRequest{}))
			if !errors.Is(err, tc.cause) || runs.Load() != 0 || idempotency.Reason(err) != "" {
				t.Fatalf("Do: %v (reason %q), fn ran %d times; want the cause wrapped and fn not run", err, idempotency.Reason(err), runs.Load())
			}
			st, isStatus := status.FromError(err)
			if isStatus != tc.isStatus {
				t.Fatalf("status.FromError(%v) ok = %v, want %v", err, isStatus, tc.isStatus)
			}
			if tc.isStatus && (!proto.Equal(st.Proto(), status.Convert(tc.cause).Proto()) || status.Code(err) != status.Code(tc.cause)) {
				t.Fatalf("status of Do's error: %v, want %v", st.Proto(), status.Convert(tc.cause).Proto())
			}
			if !strings.Contains(err.Error(), tc.cause.Error()) {
				t.Fatalf("Do's error %q does not say its cause %q", err, tc.cause)
			}
		})
	}
}

// The gRPC interceptors answer the same failures as before Do wrapped
// them (decision 7): a scope function's status as it is, any other scope
// error as INTERNAL without its text, and a fingerprint function's error
// as INTERNAL without its text; the handler does not run. Unary calls and
// streams alike.
func TestInterceptorHookErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range hookFailures {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			unary := newFixture(t, nil, hookOption(tc.scope, tc.cause))
			_, uerr := unary.client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			svc, _, output := streamServer(t, memStore(t), hookOption(tc.scope, tc.cause))
			serr := output(withKey(t.Context(), "k"), 1, 8).Err
			for _, c := range []struct {
				name string
				err  error
				runs int64
			}{{"unary", uerr, unary.srv.Service.Executions()}, {"stream", serr, svc.Executions()}} {
				want := status.New(codes.Internal, tc.edgeMessage).Proto()
				if tc.edgeMessage == "" {
					want = status.Convert(tc.cause).Proto()
				}
				if got := status.Convert(c.err).Proto(); !proto.Equal(got, want) || c.runs != 0 {
					t.Fatalf("%s: %v, handler ran %d times; want %v and no run", c.name, got, c.runs, want)
				}
			}
		})
	}
}
