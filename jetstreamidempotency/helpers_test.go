package jetstreamidempotency_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency/internal/test/natstest"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

const (
	stream  = "ORDERS"
	durable = "worker"
	// waitLimit bounds every wait for an event; a test that reaches it
	// fails.
	waitLimit = 20 * time.Second
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
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- p.Consume(ctx, cons, jetstream.PullMaxMessages(1)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// results collects the Results of the processors it is given to.
type results chan jetstreamidempotency.Result

func newResults() results { return make(results, 1000) }

func (r results) option() jetstreamidempotency.Option {
	return jetstreamidempotency.WithResults(func(res jetstreamidempotency.Result) { r <- res })
}

// wait returns the next Result that match accepts, failing the test after
// waitLimit; the Results it skips are returned in seen.
func (r results) wait(t *testing.T, what string, match func(jetstreamidempotency.Result) bool) (got jetstreamidempotency.Result, seen []jetstreamidempotency.Result) {
	t.Helper()
	limit := time.After(waitLimit)
	for {
		select {
		case res := <-r:
			if match(res) {
				return res, seen
			}
			seen = append(seen, res)
		case <-limit:
			t.Fatalf("no result %s after %v; saw %+v", what, waitLimit, seen)
		}
	}
}

// ledger is the side effect the tests own: how many times each message's
// work was done.
type ledger struct {
	mu   sync.Mutex
	done map[string]int
}

func (l *ledger) write(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = map[string]int{}
	}
	l.done[id]++
}

func (l *ledger) count(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done[id]
}

// body returns the message's body as a string: the tests' message id.
func body(msg jetstream.Msg) string { return string(msg.Data()) }
