package idempotency_test

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A start-up check: once the services are registered, ValidateServer
// checks every method the server serves with the interceptor's options.
// Here a method name mistyped in WithMethodPolicy (Chrage for Charge) is
// caught before the server takes traffic.
func ExampleValidateServer() {
	memory := memorystore.New()
	defer memory.Close()

	opts := []idempotency.Option{
		idempotency.WithMethodPolicy("/shop.v1.PaymentsService/Chrage",
			idempotency.MethodPolicy{Mode: idempotency.ModeRequired}),
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(memory, opts...)))
	registerPaymentsServer(srv, &paymentsServer{})

	if err := idempotency.ValidateServer(srv, opts...); err != nil {
		fmt.Println(err) // in production: log.Fatal(err), before Serve
	}
	// Output:
	// idempotency: method /shop.v1.PaymentsService/Chrage: WithMethodPolicy names a method the server does not serve
}
