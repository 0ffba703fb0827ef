package jetstreamidempotency_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

// TestOutcomeNotStoredAcked: the handler ran and succeeded, and the store
// failed every Complete until the store timeout (decision 9). The
// delivery is acked all the same (decision 270): the work is done, and a
// nak would only run it a second time once the claim's lease ends. The
// message is never redelivered. A second publication of the order (another
// Nats-Msg-Id, the same Order-Id) finds the claim in flight and is nakked
// with a delay until the lease ends, then runs the handler again, since no
// outcome was stored; a third finds that run's outcome.
func TestOutcomeNotStoredAcked(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	fs := faultstore.New(testkit.NewMemoryStore(t))
	fs.FailCompletes(1 << 30)
	srv := idempotency.NewServer(fs, idempotency.WithLease(testkit.ConsumerLease), idempotency.WithStoreTimeout(100*time.Millisecond))
	res := newResults()
	var runs atomic.Int64
	p := jetstreamidempotency.NewProcessor(srv, "orders.ship", func(context.Context, jetstream.Msg) error {
		runs.Add(1)
		return nil
	}, jetstreamidempotency.WithResults(res.Add), jetstreamidempotency.WithKey(jetstreamidempotency.HeaderKey("Order-Id")),
		jetstreamidempotency.WithRetryDelay(50*time.Millisecond))
	js := b.connect()
	const wait = 500 * time.Millisecond
	cons := b.consumer(js, wait, -1)
	consume(t, p, cons)

	b.publish(js, "order-7", jetstream.MsgIDHeader, "m1", "Order-Id", "7")
	first, _ := res.Wait(t, "of the first message", func(jetstreamidempotency.Result) bool { return true })
	if !first.Ran || first.Err != nil || first.Action != jetstreamidempotency.Ack || first.SettleErr != nil {
		t.Fatalf("first: %+v; want run and acked", first)
	}
	if n := fs.Count("complete"); n == 0 {
		t.Fatal("no Complete was tried")
	}
	if info := waitSettled(t, cons, 4*wait); info.NumRedelivered != 0 {
		t.Fatalf("consumer info %+v: the acked message was redelivered", info)
	}

	fs.FailCompletes(0)
	b.publish(js, "order-7", jetstream.MsgIDHeader, "m2", "Order-Id", "7")
	second, held := res.Wait(t, "of the second message's run", func(r jetstreamidempotency.Result) bool { return r.Ran })
	if second.Err != nil || second.Action != jetstreamidempotency.Ack {
		t.Fatalf("second: %+v; want run again and acked", second)
	}
	for _, r := range held {
		if r.Action != jetstreamidempotency.NakWithDelay {
			t.Errorf("before the lease ended: %+v; want nakked with a delay", r)
		}
	}
	b.publish(js, "order-7", jetstream.MsgIDHeader, "m3", "Order-Id", "7")
	third, _ := res.Wait(t, "of the third message", func(jetstreamidempotency.Result) bool { return true })
	if third.Ran || third.Err != nil || third.Action != jetstreamidempotency.Ack {
		t.Fatalf("third: %+v; want the stored outcome, acked", third)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2", n)
	}
}
