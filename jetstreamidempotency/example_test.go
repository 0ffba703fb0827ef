package jetstreamidempotency_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency/natstest"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A Processor ships each order once: the producer publishes order 7 twice,
// under two message ids, and the consumer, keyed on the Order-Id header,
// runs the second delivery's handler not at all and acknowledges it. A
// NATS server with JetStream runs inside the example, on a free loopback
// port; in production, connect to yours.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example-")
	defer os.RemoveAll(dir)
	ns, err := natstest.Start(dir)
	if err != nil {
		panic(err)
	}
	defer ns.WaitForShutdown()
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	memory := memorystore.New() // in production, the store every instance shares
	defer memory.Close()
	idem := idempotency.NewServer(memory)
	ship := func(_ context.Context, msg jetstream.Msg) error {
		fmt.Println("shipping", string(msg.Data()))
		return nil
	}
	p := jetstreamidempotency.NewProcessor(idem, "orders.ship", ship,
		jetstreamidempotency.WithKey(jetstreamidempotency.HeaderKey("Order-Id")),
		jetstreamidempotency.WithConn(nc))

	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		panic(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{
		Durable: "shipper", AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		panic(err)
	}
	for _, id := range []string{"m1", "m2"} {
		m := nats.NewMsg("orders.new")
		m.Data = []byte("order 7")
		m.Header.Set(jetstream.MsgIDHeader, id)
		m.Header.Set("Order-Id", "7")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			panic(err)
		}
	}
	results, err := p.Fetch(ctx, cons, 2)
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		fmt.Printf("%s, delivery %d: ran %v, %v\n", r.Key, r.Delivery, r.Ran, r.Action)
	}
	// Output:
	// shipping order 7
	// Order-Id:7, delivery 1: ran true, ack
	// Order-Id:7, delivery 1: ran false, ack
}
