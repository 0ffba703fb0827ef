package kafkaidempotency_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
)

// A configuration error panics at construction, naming the option.
func TestConfigurationPanics(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, *kgo.Record) error { return nil }
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"nil server", func() { kafkaidempotency.NewProcessor(nil, "op", ok) }, "NewProcessor: the idempotency server is nil"},
		{"empty op", func() { kafkaidempotency.NewProcessor(testkit.NewConsumerServer(t), "", ok) }, "NewProcessor: the operation name is empty"},
		{"op named like a method", func() { kafkaidempotency.NewProcessor(testkit.NewConsumerServer(t), "/shop.v1.Orders/Ship", ok) }, `operation "/shop.v1.Orders/Ship" must not start with "/"`},
		{"nil handler", func() { kafkaidempotency.NewProcessor(testkit.NewConsumerServer(t), "op", nil) }, "NewProcessor: the handler is nil"},
		{"nil key", func() { kafkaidempotency.WithKey(nil) }, "WithKey"},
		{"empty header", func() { kafkaidempotency.HeaderKey("") }, "HeaderKey"},
		{"no attempts", func() { kafkaidempotency.WithMaxAttempts(0) }, "WithMaxAttempts"},
		{"zero backoff", func() { kafkaidempotency.WithBackoff(0, time.Second) }, "WithBackoff"},
		{"backoff limit below first", func() { kafkaidempotency.WithBackoff(time.Second, time.Millisecond) }, "WithBackoff"},
		{"zero retry delay", func() { kafkaidempotency.WithRetryDelay(0) }, "WithRetryDelay"},
		{"nil dead letter", func() { kafkaidempotency.WithDeadLetter(nil) }, "WithDeadLetter"},
		{"nil results", func() { kafkaidempotency.WithResults(nil) }, "WithResults"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "kafkaidempotency: ") || !strings.Contains(msg, tt.want) {
					t.Fatalf("panic %q, want one naming %q", msg, tt.want)
				}
			}()
			tt.f()
		})
	}
}

// Run refuses a client without a consumer group: committing offsets needs
// one.
func TestRunWithoutGroup(t *testing.T) {
	t.Parallel()
	k := startCluster(t, 1)
	p := kafkaidempotency.NewProcessor(testkit.NewConsumerServer(t), "orders.ship", func(context.Context, *kgo.Record) error { return nil })
	err := p.Run(t.Context(), kgo.SeedBrokers(k.seeds...), kgo.ConsumeTopics(topic))
	if err == nil || !strings.Contains(err.Error(), "kgo.ConsumerGroup") {
		t.Fatalf("Run without a group: %v; want an error naming kgo.ConsumerGroup", err)
	}
}
