package jetstreamidempotency_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

const ackWait = time.Second

// TestAckLostRedeliveryFindsOutcome: instance A runs the message and its
// connection drops before its ack reaches JetStream (the handler cuts it
// as its last step), so the message is redelivered after AckWait to
// instance B. B finds the outcome A stored, does not run the handler, and
// acks: the ledger holds one entry, written once.
func TestAckLostRedeliveryFindsOutcome(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	srv, res, book := testkit.NewConsumerServer(t), newResults(), &testkit.Ledger{}
	jsA, ncA := b.connectConn()
	a := jetstreamidempotency.NewProcessor(srv, "orders.ship", func(_ context.Context, msg jetstream.Msg) error {
		book.Write(body(msg))
		ncA.Close() // A's link drops after the work, before the ack
		return nil
	}, jetstreamidempotency.WithResults(res.Add))
	consume(t, a, b.consumer(jsA, ackWait, -1))
	b.publish(b.connect(), "order-1", jetstream.MsgIDHeader, "m1")

	first, _ := res.Wait(t, "from A", func(r jetstreamidempotency.Result) bool { return true })
	if !first.Ran || first.Err != nil || first.Action != jetstreamidempotency.Ack || first.SettleErr == nil {
		t.Fatalf("A: %+v; want ran, nil, an ack that failed", first)
	}
	jsB := b.connect()
	bp := jetstreamidempotency.NewProcessor(srv, "orders.ship", func(_ context.Context, msg jetstream.Msg) error {
		book.Write(body(msg))
		return nil
	}, jetstreamidempotency.WithResults(res.Add))
	consume(t, bp, b.consumer(jsB, ackWait, -1))
	second, _ := res.Wait(t, "from B", func(r jetstreamidempotency.Result) bool { return true })
	if second.Delivery != 2 || second.Ran || second.Err != nil || second.Action != jetstreamidempotency.Ack || second.SettleErr != nil {
		t.Fatalf("B: %+v; want delivery 2 not run, acked", second)
	}
	if n := book.Count("order-1"); n != 1 {
		t.Fatalf("ledger: order-1 written %d times, want 1", n)
	}
}

// TestSecondInstanceHeldOffByClaim: without InProgress, a handler that
// runs past AckWait sees its message redelivered mid-run to a second
// instance on the same durable consumer. The claim holds it off
// (ErrKeyInUse, NakWithDelay); once the first run is stored and acked, the
// next redelivery finds the outcome and acks without running.
func TestSecondInstanceHeldOffByClaim(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	srv, res, book := testkit.NewConsumerServer(t), newResults(), &testkit.Ledger{}
	heldOff := make(chan struct{})
	release := sync.OnceFunc(func() { close(heldOff) })
	var runs int
	handler := func(_ context.Context, msg jetstream.Msg) error {
		runs++ // the claim serialises runs: no lock needed, and -race checks it
		<-heldOff
		book.Write(body(msg))
		return nil
	}
	opts := []jetstreamidempotency.Option{jetstreamidempotency.WithResults(res.Add), jetstreamidempotency.WithProgressEvery(-1), jetstreamidempotency.WithRetryDelay(100 * time.Millisecond)}
	jsA, jsB := b.connect(), b.connect()
	consume(t, jetstreamidempotency.NewProcessor(srv, "orders.ship", handler, opts...), b.consumer(jsA, ackWait, -1))
	consume(t, jetstreamidempotency.NewProcessor(srv, "orders.ship", handler, opts...), b.consumer(jsB, ackWait, -1))
	t.Cleanup(release) // runs before the instances are awaited: a failed test must not hang
	b.publish(b.connect(), "order-1", jetstream.MsgIDHeader, "m1")

	dup, _ := res.Wait(t, "held off by the claim", func(r jetstreamidempotency.Result) bool {
		return errors.Is(r.Err, idempotency.ErrKeyInUse)
	})
	if dup.Delivery < 2 || dup.Ran || dup.Action != jetstreamidempotency.NakWithDelay {
		t.Fatalf("duplicate: %+v; want a redelivery, not run, nakked with delay", dup)
	}
	release()
	first, _ := res.Wait(t, "of the first run", func(r jetstreamidempotency.Result) bool { return r.Ran })
	if first.Delivery != 1 || first.Err != nil || first.Action != jetstreamidempotency.Ack || first.SettleErr != nil {
		t.Fatalf("first run: %+v; want delivery 1 acked", first)
	}
	if n := book.Count("order-1"); n != 1 || runs != 1 {
		t.Fatalf("order-1: written %d times, handler ran %d times; want 1, 1", n, runs)
	}
}

// TestDuplicatePublishSameBusinessID: keyed on a business id
// (HeaderKey("Order-Id")), a fact published twice as two messages with two
// Msg-Ids (which JetStream's own deduplication keeps both of) runs once:
// the second message finds the first one's outcome and is acked.
func TestDuplicatePublishSameBusinessID(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	srv, res, book := testkit.NewConsumerServer(t), newResults(), &testkit.Ledger{}
	js := b.connect()
	p := jetstreamidempotency.NewProcessor(srv, "orders.ship", func(_ context.Context, msg jetstream.Msg) error {
		book.Write(body(msg))
		return nil
	}, jetstreamidempotency.WithResults(res.Add), jetstreamidempotency.WithKey(jetstreamidempotency.HeaderKey("Order-Id")))
	consume(t, p, b.consumer(js, ackWait, -1))
	pub := b.connect()
	b.publish(pub, "order-7", jetstream.MsgIDHeader, "m1", "Order-Id", "7")
	b.publish(pub, "order-7", jetstream.MsgIDHeader, "m2", "Order-Id", "7")

	first, _ := res.Wait(t, "of the first message", func(jetstreamidempotency.Result) bool { return true })
	second, _ := res.Wait(t, "of the second message", func(jetstreamidempotency.Result) bool { return true })
	if !first.Ran || first.Action != jetstreamidempotency.Ack || second.Ran || second.Err != nil || second.Action != jetstreamidempotency.Ack {
		t.Fatalf("first %+v, second %+v; want the first run and acked, the second acked without running", first, second)
	}
	if first.Key != "Order-Id:7" || second.Key != first.Key {
		t.Fatalf("keys %q, %q; want both Order-Id:7", first.Key, second.Key)
	}
	if n := book.Count("order-7"); n != 1 {
		t.Fatalf("ledger: order-7 written %d times, want 1", n)
	}
}

// TestRetryableErrorRunsAgain: a handler error that is not a stored code
// releases the claim and naks the message, so JetStream redelivers it at
// once and the handler runs again; its success is acked and never run
// again.
func TestRetryableErrorRunsAgain(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	srv, res, book := testkit.NewConsumerServer(t), newResults(), &testkit.Ledger{}
	errFlaky := errors.New("the warehouse API timed out")
	var runs int
	js := b.connect()
	p := jetstreamidempotency.NewProcessor(srv, "orders.ship", func(_ context.Context, msg jetstream.Msg) error {
		if runs++; runs == 1 {
			return errFlaky
		}
		book.Write(body(msg))
		return nil
	}, jetstreamidempotency.WithResults(res.Add))
	consume(t, p, b.consumer(js, ackWait, -1))
	b.publish(b.connect(), "order-1", jetstream.MsgIDHeader, "m1")

	failed, _ := res.Wait(t, "of the failed run", func(jetstreamidempotency.Result) bool { return true })
	if !failed.Ran || !errors.Is(failed.Err, errFlaky) || failed.Action != jetstreamidempotency.Nak {
		t.Fatalf("first delivery: %+v; want run, its error, nakked", failed)
	}
	again, _ := res.Wait(t, "of the redelivery", func(jetstreamidempotency.Result) bool { return true })
	if again.Delivery != 2 || !again.Ran || again.Err != nil || again.Action != jetstreamidempotency.Ack || again.SettleErr != nil {
		t.Fatalf("redelivery: %+v; want delivery 2 run and acked", again)
	}
	if n := book.Count("order-1"); n != 1 || runs != 2 {
		t.Fatalf("order-1: written %d times, handler ran %d times; want 1, 2", n, runs)
	}
}

// TestRetryLaterWaitsRetryAfter: a message whose store is full (or whose
// key is in flight) is nakked with a delay of the server's RetryAfter by
// default: its redelivery comes no sooner; the handler does not run until
// the store has room.
func TestRetryLaterWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	const retryAfter = 1500 * time.Millisecond // above DefaultRetryAfter: a delay of the default would be too short
	b := startBroker(t)
	full := faultstore.New(testkit.NewMemoryStore(t))
	full.Full.Store(true)
	srv := idempotency.NewServer(full, idempotency.WithLease(testkit.ConsumerLease), idempotency.WithRetryAfter(retryAfter))
	res := newResults()
	var first time.Time
	p := jetstreamidempotency.NewProcessor(srv, "orders.ship", func(context.Context, jetstream.Msg) error { return nil },
		jetstreamidempotency.WithResults(res.Add))
	js := b.connect()
	consume(t, p, b.consumer(js, ackWait, -1))
	b.publish(js, "order-1", jetstream.MsgIDHeader, "m1")
	r, _ := res.Wait(t, "of the first delivery", func(jetstreamidempotency.Result) bool { return true })
	first = time.Now()
	if r.Ran || !errors.Is(r.Err, idempotency.ErrStoreFull) || r.Action != jetstreamidempotency.NakWithDelay {
		t.Fatalf("first delivery: %+v; want ErrStoreFull, nakked with delay", r)
	}
	full.Full.Store(false)
	again, _ := res.Wait(t, "of the redelivery", func(jetstreamidempotency.Result) bool { return true })
	if gap := time.Since(first); gap < retryAfter*3/4 || again.Delivery != 2 || !again.Ran || again.Action != jetstreamidempotency.Ack {
		t.Fatalf("redelivery %+v after %v; want delivery 2, run and acked, after about %v", again, gap, retryAfter)
	}
}
