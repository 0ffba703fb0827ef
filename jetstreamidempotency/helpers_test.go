package jetstreamidempotency_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency/natstest"
)

const (
	stream  = "ORDERS"
	durable = "worker"
)

// broker is a NATS server with JetStream started for one test, with the
// ORDERS stream.
type broker struct {
	t   *testing.T
	url string
}

// startBroker starts an embedded NATS server on a free port and creates
// the ORDERS stream (subjects orders.>).
func startBroker(t *testing.T) *broker {
	t.Helper()
	s, err := natstest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return newBroker(t, s.ClientURL())
}

// startBinaryBroker starts the machine's nats-server binary (Debian 12's
// is 2.9.10) and creates the ORDERS stream on it; the test is skipped
// when there is no binary, unless natstest.RequireBinaryEnv is "1".
func startBinaryBroker(t *testing.T) *broker {
	t.Helper()
	return newBroker(t, natstest.StartBinary(t).URL)
}

// newBroker creates the ORDERS stream on the server at url.
func newBroker(t *testing.T, url string) *broker {
	t.Helper()
	b := &broker{t: t, url: url}
	if _, err := b.connect().CreateStream(t.Context(), jetstream.StreamConfig{Name: stream, Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	return b
}

// connect opens a connection of its own (a consumer instance, or the
// publisher), closed at the end of the test.
func (b *broker) connect() jetstream.JetStream {
	b.t.Helper()
	js, _ := b.connectConn()
	return js
}

// connectConn is connect, returning the connection too, for a test that
// cuts it.
func (b *broker) connectConn() (jetstream.JetStream, *nats.Conn) {
	b.t.Helper()
	nc, err := nats.Connect(b.url)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.t.Fatal(err)
	}
	return js, nc
}

// consumer creates the durable pull consumer "worker" with cfg's AckWait
// and MaxDeliver, and explicit acks.
func (b *broker) consumer(js jetstream.JetStream, ackWait time.Duration, maxDeliver int) jetstream.Consumer {
	b.t.Helper()
	c, err := js.CreateOrUpdateConsumer(b.t.Context(), stream, jetstream.ConsumerConfig{
		Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: maxDeliver,
	})
	if err != nil {
		b.t.Fatal(err)
	}
	return c
}

// publish publishes body on orders.new with the given headers (pairs of
// name and value; a Nats-Msg-Id among them sets the message's id), and
// waits for the stream to store it.
func (b *broker) publish(js jetstream.JetStream, body string, headers ...string) {
	b.t.Helper()
	m := nats.NewMsg("orders.new")
	m.Data = []byte(body)
	for i := 0; i+1 < len(headers); i += 2 {
		m.Header.Set(headers[i], headers[i+1])
	}
	if _, err := js.PublishMsg(b.t.Context(), m); err != nil {
		b.t.Fatal(err)
	}
}

// consume runs p.Consume on cons until the end of the test, one message
// pulled at a time (so a busy instance holds no buffered message), and
// waits for it to return at cleanup.
func consume(t *testing.T, p *jetstreamidempotency.Processor, cons jetstream.Consumer) {
	t.Helper()
	testkit.RunInBackground(t, func(ctx context.Context) error {
		return p.Consume(ctx, cons, jetstream.PullMaxMessages(1))
	})
}

// newResults returns a recorder of the Results of the processors given
// jetstreamidempotency.WithResults(res.Add).
func newResults() testkit.Results[jetstreamidempotency.Result] {
	return testkit.NewResults[jetstreamidempotency.Result]()
}

// body returns the message's body as a string: the tests' message id.
func body(msg jetstream.Msg) string { return string(msg.Data()) }
