package idempotency_test

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

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
