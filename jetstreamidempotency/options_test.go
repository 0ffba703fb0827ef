package jetstreamidempotency_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

// A configuration error panics at construction, naming the option.
func TestConfigurationPanics(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, jetstream.Msg) error { return nil }
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"nil server", func() { jetstreamidempotency.NewProcessor(nil, "op", ok) }, "NewProcessor: the idempotency server is nil"},
		{"empty op", func() { jetstreamidempotency.NewProcessor(testkit.NewConsumerServer(t), "", ok) }, "NewProcessor: the operation name is empty"},
		{"op named like a method", func() { jetstreamidempotency.NewProcessor(testkit.NewConsumerServer(t), "/shop.v1.Orders/Ship", ok) }, `operation "/shop.v1.Orders/Ship" must not start with "/"`},
		{"nil handler", func() { jetstreamidempotency.NewProcessor(testkit.NewConsumerServer(t), "op", nil) }, "NewProcessor: the handler is nil"},
		{"nil key", func() { jetstreamidempotency.WithKey(nil) }, "WithKey"},
		{"empty header", func() { jetstreamidempotency.HeaderKey("") }, "HeaderKey"},
		{"zero progress", func() { jetstreamidempotency.WithProgressEvery(0) }, "WithProgressEvery"},
		{"negative retry delay", func() { jetstreamidempotency.WithRetryDelay(-1) }, "WithRetryDelay"},
		{"nil results", func() { jetstreamidempotency.WithResults(nil) }, "WithResults"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "jetstreamidempotency: ") || !strings.Contains(msg, tt.want) {
					t.Fatalf("panic %q, want one naming %q", msg, tt.want)
				}
			}()
			tt.f()
		})
	}
}
