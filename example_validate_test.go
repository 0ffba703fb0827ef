package idempotency_test

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A start-up check: once the services are registered, ValidateServer
// checks every method the server serves with the interceptor's options.
// Here a method name mistyped in WithMethodPolicy (Charge for Do) is
// caught before the server takes traffic.
func ExampleValidateServer() {
	store := memorystore.New()
	defer store.Close()

	opts := []idempotency.Option{
		idempotency.WithMethodPolicy("/idempotency.testing.v1.TestService/Charge",
			idempotency.MethodPolicy{Mode: idempotency.ModeRequired}),
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(store, opts...)))
	testingv1.RegisterTestServiceServer(srv, &testserver.Service{})

	if err := idempotency.ValidateServer(srv, opts...); err != nil {
		fmt.Println(err) // in production: log.Fatal(err), before Serve
	}
	// Output:
	// idempotency: method /idempotency.testing.v1.TestService/Charge: WithMethodPolicy names a method the server does not serve
}
