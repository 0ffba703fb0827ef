package idempotency_test

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A consumer asks the server whether a handler's error is stored (final
// for the key) or released the claim (the redelivery runs it again).
func ExampleServer_StoresError() {
	memory := memorystore.New()
	defer memory.Close()
	s := idempotency.NewServer(memory, idempotency.WithStoredCodes(codes.InvalidArgument, codes.DataLoss))
	for _, err := range []error{
		status.Error(codes.InvalidArgument, "no such product"),
		status.Error(codes.DataLoss, "the order record is truncated"),
		status.Error(codes.NotFound, "no such customer"), // a default code this server does not store
		status.Error(codes.Unavailable, "the warehouse is down"),
		errors.New("not a status"),
		nil,
	} {
		fmt.Println(s.StoresError(err))
	}
	// Output:
	// true
	// true
	// false
	// false
	// false
	// false
}
