package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency/natstest"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

const (
	ackWait = time.Second
	// slowWork is how long the slow order takes to ship: past AckWait.
	slowWork = ackWait * 5 / 2
)

// warehouse is the side effect: the orders it shipped, and how often.
type warehouse struct {
	mu      sync.Mutex
	shipped map[string]int
	flaky   map[string]bool // orders whose first attempt times out
}

var errTimeout = errors.New("the warehouse API timed out")

// ship is the consumer's handler.
func (w *warehouse) ship(ctx context.Context, msg jetstream.Msg) error {
	order := msg.Headers().Get("Order-Id")
	switch {
	case order == "3":
		return status.Error(codes.InvalidArgument, "no such product") // the same on every try: stored
	case order == "4":
		select { // the slow work; the Processor keeps the message in progress
		case <-time.After(slowWork):
		case <-ctx.Done(): // the claim was lost: stop before shipping
			return context.Cause(ctx)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.flaky[order] {
		w.flaky[order] = false
		return errTimeout // retryable: released, nakked, run again
	}
	w.shipped[order]++
	return nil
}

// run tells the story on an embedded NATS server and checks every outcome.
func run(ctx context.Context, out io.Writer) error {
	dir, err := os.MkdirTemp("", "jetstream-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ns, err := natstest.Start(dir)
	if err != nil {
		return err
	}
	defer ns.WaitForShutdown()
	defer ns.Shutdown()

	w := &warehouse{shipped: map[string]int{}, flaky: map[string]bool{"2": true}}
	idem := idempotency.NewServer(memorystore.New(), idempotency.WithLease(300*time.Millisecond))
	results := make(chan jetstreamidempotency.Result, 16)
	p := jetstreamidempotency.NewProcessor(idem, "orders.ship", w.ship,
		jetstreamidempotency.WithKey(jetstreamidempotency.HeaderKey("Order-Id")),
		jetstreamidempotency.WithRetryDelay(100*time.Millisecond),
		jetstreamidempotency.WithResults(func(r jetstreamidempotency.Result) { results <- r }))

	pub, err := connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer pub.Conn().Close()
	if _, err := pub.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var consumers sync.WaitGroup
	defer consumers.Wait()
	defer cancel()
	for range 2 { // two instances, each on its own connection
		js, err := connect(ns.ClientURL())
		if err != nil {
			return err
		}
		defer js.Conn().Close()
		cons, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{
			Durable: "shipper", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
		})
		if err != nil {
			return err
		}
		consumers.Go(func() { _ = p.Consume(ctx, cons, jetstream.PullMaxMessages(1)) })
	}

	for _, ch := range chapters {
		fmt.Fprintln(out, ch.title)
		for _, m := range ch.publish {
			dropped, err := publish(ctx, pub, m[0], m[1], out)
			if err != nil {
				return err
			}
			if dropped { // no delivery to wait for
				continue
			}
			got, err := deliveries(ctx, results)
			if err != nil {
				return err
			}
			for _, r := range got {
				fmt.Fprintf(out, "  %s, delivery %d: %s\n", r.Key, r.Delivery, describe(r))
			}
			if r := got[len(got)-1]; r.Action != ch.want {
				return fmt.Errorf("%s: %s, want %s", r.Key, r.Action, ch.want)
			}
		}
	}
	return w.check(out)
}

// deliveries returns the Results of one message's deliveries in order,
// once one of them settled it for good (Ack or Term). Each instance
// reports a delivery after settling it, so a redelivery on the other
// instance can report before the delivery that nakked it.
func deliveries(ctx context.Context, results <-chan jetstreamidempotency.Result) ([]jetstreamidempotency.Result, error) {
	var got []jetstreamidempotency.Result
	var last uint64 // the delivery that settled the message, 0 until one has
	for last == 0 || uint64(len(got)) < last {
		select {
		case r := <-results:
			got = append(got, r)
			if r.Action == jetstreamidempotency.Ack || r.Action == jetstreamidempotency.Term {
				last = r.Delivery
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	slices.SortFunc(got, func(a, b jetstreamidempotency.Result) int { return cmp.Compare(a.Delivery, b.Delivery) })
	return got, nil
}

// chapter is one order's story: the messages published (Order-Id and
// Msg-Id) and how the delivery that ends each message must be settled.
type chapter struct {
	title   string
	publish [][2]string
	want    jetstreamidempotency.Action
}

var chapters = []chapter{
	{"1. Order 1, published three times: again with its Msg-Id, then with a new one.",
		[][2]string{{"1", "order-1"}, {"1", "order-1"}, {"1", "order-1-retry"}}, jetstreamidempotency.Ack},
	{"2. Order 2: the warehouse times out the first time.", [][2]string{{"2", "order-2"}}, jetstreamidempotency.Ack},
	{"3. Order 3: no such product.", [][2]string{{"3", "order-3"}}, jetstreamidempotency.Term},
	{"4. Order 4 takes longer than AckWait to ship.", [][2]string{{"4", "order-4"}}, jetstreamidempotency.Ack},
}

// publish publishes order with Msg-Id id, and reports whether JetStream
// dropped it as a duplicate of a message stored with that id.
func publish(ctx context.Context, js jetstream.JetStream, order, id string, out io.Writer) (dropped bool, err error) {
	m := nats.NewMsg("orders.new")
	m.Data = []byte("order " + order)
	m.Header.Set("Order-Id", order)
	m.Header.Set(jetstream.MsgIDHeader, id)
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		return false, err
	}
	if ack.Duplicate {
		fmt.Fprintf(out, "  Msg-Id %s again: JetStream dropped it as a duplicate\n", id)
	}
	return ack.Duplicate, nil
}

func describe(r jetstreamidempotency.Result) string {
	switch {
	case r.Ran && r.Err == nil:
		return "shipped, " + r.Action.String()
	case r.Err == nil:
		return "shipped before, not run, " + r.Action.String()
	case r.Ran:
		return fmt.Sprintf("ran, failed (%v), %s", r.Err, r.Action)
	}
	return fmt.Sprintf("not run (%v), %s", r.Err, r.Action)
}

// check prints what the warehouse shipped and fails unless each order
// that exists shipped once.
func (w *warehouse) check(out io.Writer) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(out, "Shipped: order 1 ×%d, order 2 ×%d, order 3 ×%d, order 4 ×%d\n",
		w.shipped["1"], w.shipped["2"], w.shipped["3"], w.shipped["4"])
	for order, want := range map[string]int{"1": 1, "2": 1, "3": 0, "4": 1} {
		if w.shipped[order] != want {
			return fmt.Errorf("order %s shipped %d times, want %d", order, w.shipped[order], want)
		}
	}
	return nil
}

func connect(url string) (jetstream.JetStream, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
	}
	return js, err
}
