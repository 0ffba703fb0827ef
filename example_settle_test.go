package idempotency_test

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

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
