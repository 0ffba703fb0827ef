package idempotency_test

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// The options are stated once, in NewServer. The gRPC server runs its
// interceptor, and once the services are registered its start-up check,
// Validate, checks every method the server serves with the same options.
// Here a method name mistyped in WithMethodPolicy (Chrage for Charge) is
// caught before the server takes traffic.
func ExampleNewServer() {
	memory := memorystore.New()
	defer memory.Close()

	idem := idempotency.NewServer(memory,
		idempotency.WithMethodPolicy("/shop.v1.PaymentsService/Chrage",
			idempotency.MethodPolicy{Mode: idempotency.ModeRequired}),
	)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idem.UnaryServerInterceptor()))
	registerPaymentsServer(srv, &paymentsServer{})

	if err := idem.Validate(srv); err != nil {
		fmt.Println(err) // in production: log.Fatal(err), before Serve
	}
	// Output:
	// idempotency: method /shop.v1.PaymentsService/Chrage: WithMethodPolicy names a method the server does not serve
}
