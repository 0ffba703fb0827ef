package idempotency_test

import (
	"context"
	"fmt"
	"time"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

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
