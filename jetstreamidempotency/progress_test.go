package jetstreamidempotency_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

// TestProgressHoldsSlowHandler: a handler that runs two and a half times
// AckWait, with InProgress sent every third of AckWait (the default) and a
// second instance waiting on the same durable consumer, is never
// redelivered: the message is delivered once, run once and acked, and
// JetStream's consumer has made one delivery. (Without InProgress it is
// redelivered mid-run: TestSecondInstanceHeldOffByClaim.)
func TestProgressHoldsSlowHandler(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	srv, res, book := testkit.NewConsumerServer(t), newResults(), &testkit.Ledger{}
	handler := func(_ context.Context, msg jetstream.Msg) error {
		<-time.After(ackWait * 5 / 2) // the slow work itself
		book.Write(body(msg))
		return nil
	}
	jsA, jsB := b.connect(), b.connect()
	cons := b.consumer(jsA, ackWait, -1)
	consume(t, jetstreamidempotency.NewProcessor(srv, "orders.ship", handler, jetstreamidempotency.WithResults(res.Add)), cons)
	consume(t, jetstreamidempotency.NewProcessor(srv, "orders.ship", handler, jetstreamidempotency.WithResults(res.Add)), b.consumer(jsB, ackWait, -1))
	b.publish(b.connect(), "order-1", jetstream.MsgIDHeader, "m1")

	got, seen := res.Wait(t, "of the run", func(r jetstreamidempotency.Result) bool { return r.Ran })
	if len(seen) != 0 || got.Delivery != 1 || got.Err != nil || got.Action != jetstreamidempotency.Ack || got.SettleErr != nil {
		t.Fatalf("run %+v after %+v; want delivery 1 acked, and no other delivery", got, seen)
	}
	info, err := cons.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Consumer != 1 || info.NumAckPending != 0 {
		t.Fatalf("consumer: %d deliveries, %d pending acks; want 1, 0", info.Delivered.Consumer, info.NumAckPending)
	}
	if n := book.Count("order-1"); n != 1 {
		t.Fatalf("ledger: order-1 written %d times, want 1", n)
	}
}
