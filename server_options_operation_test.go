package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

// WithOperationPolicy panics, naming itself and the operation, on the
// fields that mean nothing for an operation and on negative durations.
func TestWithOperationPolicyPanics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		op   string
		p    idempotency.MethodPolicy
		want string
	}{
		{"", idempotency.MethodPolicy{}, "must not be empty"},
		{"op", idempotency.MethodPolicy{Mode: idempotency.ModeRequired}, "op: Mode"},
		{"op", idempotency.MethodPolicy{KeyField: "request_id"}, "op: KeyField"},
		{"op", idempotency.MethodPolicy{Namespace: "other"}, "op: Namespace"},
		{"op", idempotency.MethodPolicy{Lease: -time.Second}, "op: Lease must not be negative"},
		{"/payments.v1.Payments/Capture", idempotency.MethodPolicy{}, `"/payments.v1.Payments/Capture" must not start with "/"`},
	} {
		msg := panicOf(func() { idempotency.NewServer(memStore(t), idempotency.WithOperationPolicy(tc.op, tc.p)) })
		if !strings.Contains(msg, "idempotency: WithOperationPolicy: ") || !strings.Contains(msg, tc.want) {
			t.Errorf("WithOperationPolicy(%q, %+v) panicked with %q, want %q", tc.op, tc.p, msg, tc.want)
		}
	}
}

// An operation's policy applies to Do, and Server.Validate does not take
// the operation for a method the server fails to serve.
func TestOperationPolicy(t *testing.T) {
	t.Parallel()
	srv := testserver.New(t, &testserver.Service{})
	idem := idempotency.NewServer(memStore(t), idempotency.WithOperationPolicy("payments.charge",
		idempotency.MethodPolicy{HandlerTimeout: time.Hour}))
	if err := idem.Validate(srv.GRPC); err != nil {
		t.Fatalf("Validate: %v, want nil", err)
	}
	for op, want := range map[string]time.Duration{"payments.charge": time.Hour, "other": defaultHandlerTimeout} {
		start := time.Now()
		if _, err := idempotency.Once(t.Context(), idem, op, "k", nil, func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			if got := d.Sub(start); !ok || got < want || got > want+time.Minute/2 {
				t.Errorf("%s: fn's deadline is %v after the call, want %v", op, got, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// An operation, or a namespace, never starts with "/", as only a gRPC
// method's full name does, so that Server.StoreKey reads every name one
// way: Do and Once refuse one with ErrMisconfigured and run nothing, and
// WithMethodPolicy panics on such a Namespace, naming itself
// (TestOperationNamedLikeAMethod in package admin is the operator's side).
func TestOperationNamedLikeAMethodRefused(t *testing.T) {
	t.Parallel()
	srv := idempotency.NewServer(memStore(t))
	for _, op := range []string{"/payments.v1.Payments/Capture", "/"} {
		ran := false
		_, err := idempotency.Once(t.Context(), srv, op, "k-1", nil, func(context.Context) error { ran = true; return nil })
		if !errors.Is(err, idempotency.ErrMisconfigured) || !strings.Contains(err.Error(), `must not start with "/"`) || ran {
			t.Errorf("Once(%q) = %v, ran %v; want ErrMisconfigured naming the rule, nothing run", op, err, ran)
		}
		if err := idempotency.ValidateOperation(op); !errors.Is(err, idempotency.ErrMisconfigured) {
			t.Errorf("ValidateOperation(%q) = %v, want ErrMisconfigured", op, err)
		}
	}
	for _, op := range []string{"payments.capture", "shop.v1.Payments/Capture"} {
		if err := idempotency.ValidateOperation(op); err != nil {
			t.Errorf("ValidateOperation(%q) = %v, want nil", op, err)
		}
	}
	msg := panicOf(func() {
		idempotency.NewServer(memStore(t), idempotency.WithMethodPolicy("/shop.v1.Payments/Capture",
			idempotency.MethodPolicy{Namespace: "/payments.capture"}))
	})
	if !strings.Contains(msg, "idempotency: WithMethodPolicy: ") || !strings.Contains(msg, `Namespace "/payments.capture" must not start with "/"`) {
		t.Errorf("WithMethodPolicy with a Namespace starting with / panicked with %q", msg)
	}
}
