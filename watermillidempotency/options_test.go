package watermillidempotency_test

import (
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/watermillidempotency"
)

// A configuration error panics at construction, naming the option.
func TestConfigurationPanics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"nil server", func() { watermillidempotency.Middleware(nil) }, "Middleware: the idempotency server is nil"},
		{"empty operation", func() { watermillidempotency.WithOperation("") }, "WithOperation"},
		{"operation named like a method", func() { watermillidempotency.WithOperation("/shop.v1.Orders/Ship") }, `operation "/shop.v1.Orders/Ship" must not start with "/"`},
		{"nil key", func() { watermillidempotency.WithKey(nil) }, "WithKey"},
		{"empty metadata name", func() { watermillidempotency.MetadataKey("") }, "MetadataKey"},
		{"zero retry delay", func() { watermillidempotency.WithRetryDelay(0) }, "WithRetryDelay"},
		{"nil dead letter", func() { watermillidempotency.WithDeadLetter(nil) }, "WithDeadLetter"},
		{"nil results", func() { watermillidempotency.WithResults(nil) }, "WithResults"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "watermillidempotency: ") || !strings.Contains(msg, tt.want) {
					t.Fatalf("panic %q, want one naming %q", msg, tt.want)
				}
			}()
			tt.f()
		})
	}
}
