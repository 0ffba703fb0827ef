// Command jetstream is the runnable example of a NATS JetStream consumer
// that ships each order once, whatever the redeliveries, with
// the jetstreamidempotency package. It starts a NATS server
// with JetStream inside the process (a free loopback port, its streams in a
// temporary directory), two consumer instances on one durable consumer,
// and tells the story of four orders:
//
//  1. an order published twice, the second time with a new Msg-Id (a
//     producer's retry after JetStream's duplicate window): keyed on its
//     Order-Id, it ships once;
//  2. an order whose first run fails with a retryable error: nakked,
//     redelivered, shipped;
//  3. an order for a product that does not exist: a deterministic error,
//     stored, and the message is terminated (a plain Term: the example
//     gives no WithConn, which puts the error in the MSG_TERMINATED
//     advisory as its reason on nats-server 2.10.4 or later);
//  4. an order that takes longer than AckWait to ship: kept in progress,
//     delivered once.
//
// It exits with status 1 if any outcome is not the one promised, so it
// doubles as a smoke test.
//
// Usage:
//
//	go run ./examples/jetstream
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "jetstream:", err)
		stop()
		os.Exit(1)
	}
}
