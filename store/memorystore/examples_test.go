package memorystore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

func Example() {
	s := memorystore.New(memorystore.WithMaxEntries(100_000))
	defer s.Close()
	ctx := context.Background()

	// The first request with a key claims it and runs the handler.
	first, _ := s.Claim(ctx, "key", []byte("fingerprint"), time.Minute, store.ClaimOptions{})
	fmt.Println("first won:", first.Won())

	// A retry while the handler runs finds it in flight.
	retry, _ := s.Claim(ctx, "key", []byte("fingerprint"), time.Minute, store.ClaimOptions{})
	fmt.Println("retry sees:", retry.Existing.State)

	// The handler's outcome is stored under the owner token...
	_ = s.Complete(ctx, "key", first.Token, []byte("response"), 24*time.Hour)

	// ...and replayed to the next retry.
	retry, _ = s.Claim(ctx, "key", []byte("fingerprint"), time.Minute, store.ClaimOptions{})
	fmt.Printf("retry sees: %s %q\n", retry.Existing.State, retry.Existing.Data)
	// Output:
	// first won: true
	// retry sees: in_flight
	// retry sees: completed "response"
}
