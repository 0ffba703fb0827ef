package kafkaidempotency_test

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A Processor ships each order once: the producer sends order 7 twice, and
// the consumer group's member, keyed on the Order-Id header, runs the
// second record's handler not at all and commits it. A Kafka cluster runs
// inside the example (franz-go's kfake, on loopback ports); in production,
// give Run your brokers.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for range 2 {
		rec := &kgo.Record{Topic: "orders", Value: []byte("order 7"), Headers: []kgo.RecordHeader{{Key: "Order-Id", Value: []byte("7")}}}
		if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			panic(err)
		}
	}

	memory := memorystore.New() // in production, the store every member shares
	defer memory.Close()
	idem := idempotency.NewServer(memory)
	ship := func(_ context.Context, rec *kgo.Record) error {
		fmt.Println("shipping", string(rec.Value))
		return nil
	}
	settled := 0
	report := func(r kafkaidempotency.Result) {
		fmt.Printf("%s, offset %d: ran %v, %v\n", r.Key, r.Record.Offset, r.Ran, r.Action)
		if settled++; settled == 2 {
			stop()
		}
	}
	p := kafkaidempotency.NewProcessor(idem, "orders.ship", ship,
		kafkaidempotency.WithKey(kafkaidempotency.HeaderKey("Order-Id")),
		kafkaidempotency.WithResults(report))
	err = p.Run(ctx, kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumerGroup("shipper"), kgo.ConsumeTopics("orders"))
	fmt.Println("Run:", err)
	// Output:
	// shipping order 7
	// Order-Id:7, offset 0: ran true, commit
	// Order-Id:7, offset 1: ran false, commit
	// Run: <nil>
}
