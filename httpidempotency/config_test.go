package httpidempotency_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

// An option that cannot work makes Middleware panic with a message that
// names it.
func TestConfigPanics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opt  httpidempotency.Option
	}{
		{"WithKeyHeader", httpidempotency.WithKeyHeader("Idempotency Key")},
		{"WithKeyHeader", httpidempotency.WithKeyHeader("")},
		{"WithOperation", httpidempotency.WithOperation("")},
		{"WithOperation", httpidempotency.WithOperation("/payments.v1.Payments/Capture")},
		{"WithMethods", httpidempotency.WithMethods()},
		{"WithMethods", httpidempotency.WithMethods("PO ST")},
		{"WithFingerprint", httpidempotency.WithFingerprint(nil)},
		{"WithMaxRequestBytes", httpidempotency.WithMaxRequestBytes(-1)},
		{"WithMaxResponseBytes", httpidempotency.WithMaxResponseBytes(-1)},
		{"WithKeptStatuses", httpidempotency.WithKeptStatuses(nil)},
	}
	mem := testkit.NewMemoryStore(t)
	srv := idempotency.NewServer(mem)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				msg := fmt.Sprint(recover())
				if !strings.Contains(msg, "httpidempotency: "+tt.name+": ") {
					t.Fatalf("panic %q, want one naming %s", msg, tt.name)
				}
			}()
			httpidempotency.Middleware(srv, tt.opt)
		})
	}
	t.Run("nil server", func(t *testing.T) {
		t.Parallel()
		defer func() {
			if msg := fmt.Sprint(recover()); !strings.Contains(msg, "httpidempotency: Middleware: ") {
				t.Fatalf("panic %q", msg)
			}
		}()
		httpidempotency.Middleware(nil)
	})
}
