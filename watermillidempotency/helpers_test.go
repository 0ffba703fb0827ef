package watermillidempotency_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/watermillidempotency"
)

// The RabbitMQ the tests use: IDEMPOTENCY_RABBITMQ_URL, by default a local
// server with its default guest user. Without one the tests skip, or fail
// when IDEMPOTENCY_REQUIRE_RABBITMQ is 1, as in CI.
const (
	rabbitURLEnv     = "IDEMPOTENCY_RABBITMQ_URL"
	requireRabbitEnv = "IDEMPOTENCY_REQUIRE_RABBITMQ"
	defaultRabbitURL = "amqp://guest:guest@127.0.0.1:5672/"
)

// queueExpiry is how long RabbitMQ keeps a test's queue once nothing uses
// it (x-expires): tests leave no queue behind.
const queueExpiry = int32(60_000)

// rabbitURL returns the URL of the RabbitMQ the tests use, skipping or
// failing t when nothing answers there.
func rabbitURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(rabbitURLEnv)
	if u == "" {
		u = defaultRabbitURL
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatalf("%s: %v", rabbitURLEnv, err)
	}
	host := parsed.Host
	if parsed.Port() == "" {
		host = net.JoinHostPort(parsed.Hostname(), "5672")
	}
	c, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		why := "no RabbitMQ at " + host + " (" + err.Error() + ")"
		if os.Getenv(requireRabbitEnv) == "1" {
			t.Fatalf("%s, and %s=1: start one (apt-get install rabbitmq-server; rabbitmq-server -detached) or set %s", why, requireRabbitEnv, rabbitURLEnv)
		}
		t.Skipf("%s: start one (apt-get install rabbitmq-server; rabbitmq-server -detached), set %s, or set %s=1 to fail instead", why, rabbitURLEnv, requireRabbitEnv)
	}
	_ = c.Close()
	return u
}

// uniqueName returns prefix and a random suffix: each test's queues are its
// own.
func uniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// amqpConfig is a durable queue per topic on the server at u, each
// consumer holding one unacknowledged message at a time, its queues gone a
// minute after the test.
func amqpConfig(u string) amqp.Config {
	c := amqp.NewDurableQueueConfig(u)
	c.Queue.Arguments = amqp091.Table{"x-expires": queueExpiry}
	c.Consume.Qos.PrefetchCount = 1
	return c
}

// publisher returns a publisher on the server at u, closed at the end of
// the test.
func publisher(t testing.TB, u string) *amqp.Publisher {
	t.Helper()
	p, err := amqp.NewPublisher(amqpConfig(u), watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// publish publishes a message of payload with the UUID and metadata
// (pairs of key and value) to topic.
func publish(t testing.TB, p message.Publisher, topic, uuid, payload string, metadata ...string) {
	t.Helper()
	m := message.NewMessage(uuid, []byte(payload))
	for i := 0; i+1 < len(metadata); i += 2 {
		m.Metadata.Set(metadata[i], metadata[i+1])
	}
	if err := p.Publish(topic, m); err != nil {
		t.Fatal(err)
	}
}

// consumer is one consumer process: a router whose handler "ship" reads
// topic from the RabbitMQ at u through the middleware, and publishes what
// it returns to topic+".out".
type consumer struct {
	sub  *amqp.Subscriber
	stop func()
}

// kill closes the consumer's subscriber, as the death of its process
// would: RabbitMQ gets its unacknowledged message back and delivers it
// again. Its handler, if running, goes on.
func (c *consumer) kill() { _ = c.sub.Close() }

func startConsumer(t *testing.T, u, topic string, h message.HandlerFunc, mw message.HandlerMiddleware, decorators ...message.PublisherDecorator) *consumer {
	t.Helper()
	sub, err := amqp.NewSubscriber(amqpConfig(u), watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	pub := publisher(t, u)
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	router.AddMiddleware(mw)
	router.AddPublisherDecorators(decorators...)
	router.AddHandler("ship", topic, sub, topic+".out", pub, h)
	run := testkit.RunInBackground(t, func(ctx context.Context) error {
		defer context.AfterFunc(ctx, func() { _ = router.Close() })()
		return router.Run(ctx)
	})
	select {
	case <-router.Running():
	case <-run.Done():
		t.Fatalf("the router did not start: %v", run.Err())
	case <-time.After(testkit.ConsumerWait):
		t.Fatal("the router did not start")
	}
	var once sync.Once
	c := &consumer{sub: sub}
	c.stop = func() {
		once.Do(func() {
			run.Stop()
			c.kill()
		})
	}
	t.Cleanup(c.stop)
	return c
}

// newResults returns a recorder of the Results of the middlewares given
// watermillidempotency.WithResults(res.Add).
func newResults() testkit.Results[watermillidempotency.Result] {
	return testkit.NewResults[watermillidempotency.Result]()
}

// payload returns the Result's message payload: the tests' message id.
func payload(r watermillidempotency.Result) string { return string(r.Message.Payload) }
