package idempotency_test

import (
	"context"
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
