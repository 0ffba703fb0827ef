package watermillidempotency_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/watermillidempotency"
)

// BenchmarkWatermill compares a bare watermill router handler with the
// same handler behind the middleware on a memory store, each consuming
// b.N messages (published before the timer starts, each with a UUID of its
// own, so every one is executed), two ways:
//
//   - rabbitmq rows consume a RabbitMQ queue through watermill-amqp, one
//     message at a time, each acknowledged before the next is delivered,
//     as a consumer on a real broker does (skipped without a RabbitMQ,
//     unless IDEMPOTENCY_REQUIRE_RABBITMQ=1);
//   - gochannel rows consume watermill's in-process pub/sub, no network,
//     so the middleware's own cost stands out.
//
// Each row is timed from its first message handled to its last, leaving
// out the router's start; compare each row with bare of the same way in
// the same run. msgs/s counts the messages handled.
func BenchmarkWatermill(b *testing.B) {
	for _, way := range []string{"rabbitmq", "gochannel"} {
		for _, row := range []string{"bare", "executed"} {
			b.Run(way+"/"+row, func(b *testing.B) {
				var sub message.Subscriber
				var pub message.Publisher
				topic := uniqueName("bench")
				if way == "rabbitmq" {
					u := rabbitURL(b)
					cfg := amqpConfig(u)
					cfg.Consume.Qos.PrefetchCount = 0 // watermill-amqp's default
					s, err := amqp.NewSubscriber(cfg, watermill.NopLogger{})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = s.Close() })
					if err := s.SubscribeInitialize(topic); err != nil {
						b.Fatal(err)
					}
					sub, pub = s, publisher(b, u)
				} else {
					g := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
					b.Cleanup(func() { _ = g.Close() })
					sub, pub = g, g
				}
				for i := range b.N {
					publish(b, pub, topic, "order-"+strconv.Itoa(i), `{"order":4200}`)
				}
				var mw message.HandlerMiddleware
				if row == "executed" {
					mw = watermillidempotency.Middleware(idempotency.NewServer(testkit.NewMemoryStore(b)))
				}
				b.ResetTimer()
				per := benchRouter(b, sub, topic, mw)
				b.StopTimer()
				b.ReportMetric(float64(per.Nanoseconds()), "ns/op")
				b.ReportMetric(float64(time.Second)/float64(max(per, 1)), "msgs/s")
			})
		}
	}
}

// benchRouter runs a router whose handler "ship" (behind mw, unless nil)
// consumes topic until it has handled b.N messages, and returns the time
// per message from the first to the last.
func benchRouter(b *testing.B, sub message.Subscriber, topic string, mw message.HandlerMiddleware) time.Duration {
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	if mw != nil {
		router.AddMiddleware(mw)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handled atomic.Int64
	var first, last atomic.Int64 // UnixNano
	router.AddConsumerHandler("ship", topic, sub, func(*message.Message) error {
		now := time.Now().UnixNano()
		n := handled.Add(1)
		if n == 1 {
			first.Store(now)
		}
		if n == int64(b.N) {
			last.Store(now)
			cancel()
		}
		return nil
	})
	if err := router.Run(ctx); err != nil {
		b.Fatal(err)
	}
	if n := handled.Load(); n < int64(b.N) {
		b.Fatalf("handled %d messages, want %d", n, b.N)
	}
	return time.Duration(last.Load()-first.Load()) / time.Duration(max(b.N-1, 1))
}
