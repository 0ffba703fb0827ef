package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
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

// A broker's message body is raw bytes, and the request a key stands for
// is a proto message: wrapperspb.Bytes wraps the body, so the fingerprint
// covers it and a message id reused for another body is refused with
// ErrKeyReused instead of being skipped.
func ExampleOnce_brokerMessage() {
	memory := memorystore.New()
	defer memory.Close()
	idem := idempotency.NewServer(memory)

	shipped := 0
	handle := func(ctx context.Context, id string, body []byte) {
		ran, err := idempotency.Once(ctx, idem, "orders.ship", id, wrapperspb.Bytes(body),
			func(ctx context.Context) error {
				shipped++ // the side effect: ship the order in body
				return nil
			})
		switch {
		case errors.Is(err, idempotency.ErrKeyReused):
			fmt.Printf("%s: another body under this id, dead-lettered\n", id)
		case err != nil:
			fmt.Printf("%s: not acknowledged, the broker redelivers it: %v\n", id, err)
		default:
			fmt.Printf("%s: acknowledged, ran %v\n", id, ran)
		}
	}
	ctx := context.Background()
	handle(ctx, "msg-1", []byte(`{"order":"o-7"}`))
	handle(ctx, "msg-1", []byte(`{"order":"o-7"}`)) // redelivered
	handle(ctx, "msg-1", []byte(`{"order":"o-8"}`)) // a producer bug
	fmt.Println("shipped:", shipped)
	// Output:
	// msg-1: acknowledged, ran true
	// msg-1: acknowledged, ran false
	// msg-1: another body under this id, dead-lettered
	// shipped: 1
}

// WithOperationPolicy tunes one operation of Do and Once: here a report
// that takes minutes to build gets a ten-minute handler timeout instead of
// the server-wide one minute.
func ExampleWithOperationPolicy() {
	memory := memorystore.New()
	defer memory.Close()
	idem := idempotency.NewServer(memory,
		idempotency.WithOperationPolicy("reports.build", idempotency.MethodPolicy{HandlerTimeout: 10 * time.Minute}))

	_, err := idempotency.Once(context.Background(), idem, "reports.build", "report-2024-q4", nil,
		func(ctx context.Context) error {
			deadline, _ := ctx.Deadline() // the handler timeout bounds the function
			fmt.Println("more than a minute to build:", time.Until(deadline) > time.Minute)
			return nil
		})
	fmt.Println("error:", err)
	// Output:
	// more than a minute to build: true
	// error: <nil>
}

// A message consumer runs each delivery through Do and settles it with
// Server.Settle, after Do has returned: here two deliveries of one order
// (the second finds the outcome and is acked without running), and two of
// an order for no such product (a stored error: final on both).
func ExampleServer_Settle() {
	memory := memorystore.New()
	defer memory.Close()
	idem := idempotency.NewServer(memory)
	ship := func(_ context.Context, order string) error {
		if order == "order-2" {
			return status.Error(codes.InvalidArgument, "no such product")
		}
		fmt.Println("shipped", order)
		return nil
	}
	for _, order := range []string{"order-1", "order-1", "order-2", "order-2"} {
		ran := false
		_, replayed, err := idempotency.Do(context.Background(), idem, "orders.ship", order, wrapperspb.String(order),
			func(ctx context.Context) (*emptypb.Empty, error) {
				ran = true
				return &emptypb.Empty{}, ship(ctx, order)
			})
		fmt.Printf("%s: ran %v, %v\n", order, ran, idem.Settle(ran, replayed, err))
	}
	// Output:
	// shipped order-1
	// order-1: ran true, ack
	// order-1: ran false, ack
	// order-2: ran true, reject
	// order-2: ran false, reject
}
