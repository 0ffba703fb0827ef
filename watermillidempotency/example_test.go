package watermillidempotency_test

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/watermillidempotency"
)

// The middleware on a router runs each message's handler once: order 7 is
// delivered twice (a redelivery keeps its UUID), and the second delivery
// is acknowledged without running. watermill's in-process pub/sub stands
// in for a broker; with RabbitMQ, Kafka or any other, only the subscriber
// changes. (Each publish here waits for the message to be acknowledged.)
func Example() {
	memory := memorystore.New() // in production, the store every consumer shares
	defer memory.Close()
	idem := idempotency.NewServer(memory)
	pubsub := gochannel.NewGoChannel(gochannel.Config{BlockPublishUntilSubscriberAck: true}, watermill.NopLogger{})
	defer pubsub.Close()
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}

	settled := make(chan struct{}, 2)
	report := func(r watermillidempotency.Result) {
		fmt.Printf("%s %s: ran %v, %v\n", r.Operation, r.Key, r.Ran, r.Action)
		settled <- struct{}{}
	}
	router.AddMiddleware(watermillidempotency.Middleware(idem, watermillidempotency.WithResults(report)))
	router.AddConsumerHandler("orders.ship", "orders", pubsub, func(msg *message.Message) error {
		fmt.Println("shipping", string(msg.Payload))
		return nil
	})

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- router.Run(ctx) }()
	<-router.Running()
	for range 2 {
		if err := pubsub.Publish("orders", message.NewMessage("order-7", []byte("order 7"))); err != nil {
			panic(err)
		}
	}
	<-settled
	<-settled
	cancel()
	if err := <-stopped; err != nil {
		panic(err)
	}
	// Output:
	// shipping order 7
	// orders.ship order-7: ran true, ack
	// orders.ship order-7: ran false, ack
}
