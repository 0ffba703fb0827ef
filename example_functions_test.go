package idempotency_test

import (
	"context"
	"fmt"
	"log"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// Do runs a function that is not a gRPC handler once per key: here a
// charge started by a webhook, which its sender redelivers. The second
// delivery gets the first one's answer without charging again. Servers
// that share a store (redisstore, postgresstore) share the keys.
func ExampleDo() {
	memory := memorystore.New()
	defer memory.Close()
	idem := idempotency.NewServer(memory)

	charges := 0
	chargeCard := func(ctx context.Context) (*wrapperspb.StringValue, error) {
		charges++
		return wrapperspb.String(fmt.Sprintf("ch_%d", charges)), nil
	}
	req := wrapperspb.Int64(4200) // what the key stands for: the amount
	for _, delivery := range []string{"first", "redelivered"} {
		resp, replayed, err := idempotency.Do(context.Background(), idem, "payments.charge", "evt_42", req, chargeCard)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s, replayed %v\n", delivery, resp.GetValue(), replayed)
	}
	fmt.Println("charges:", charges)
	// Output:
	// first: ch_1, replayed false
	// redelivered: ch_1, replayed true
	// charges: 1
}

// Once deduplicates a consumer by message id: a broker delivers at least
// once, and the handler acts on each message once. A redelivery reports
// ran false, so the consumer acknowledges it and moves on.
func ExampleOnce() {
	memory := memorystore.New()
	defer memory.Close()
	idem := idempotency.NewServer(memory)

	type message struct {
		id   string
		body *structpb.Struct
	}
	shipped := 0
	consume := func(ctx context.Context, m message) {
		ran, err := idempotency.Once(ctx, idem, "orders.ship", m.id, m.body, func(ctx context.Context) error {
			shipped++
			return nil
		})
		if err != nil {
			log.Printf("%s: not acknowledged, the broker redelivers it: %v", m.id, err)
			return
		}
		fmt.Printf("%s: acknowledged, ran %v\n", m.id, ran)
	}
	body, _ := structpb.NewStruct(map[string]any{"order": "o-7"})
	for _, m := range []message{{"msg-1", body}, {"msg-1", body}, {"msg-2", body}} {
		consume(context.Background(), m)
	}
	fmt.Println("shipped:", shipped)
	// Output:
	// msg-1: acknowledged, ran true
	// msg-1: acknowledged, ran false
	// msg-2: acknowledged, ran true
	// shipped: 2
}
