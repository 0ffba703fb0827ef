package jetstreamidempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

// TestDeadConsumerLeaseTakeover: consumer A dies mid-handler. Its
// connection is closed, so it sends no more InProgress or ack, and its
// link to the store is cut (faultstore), so nothing renews its claim; its
// handler never finishes (a dead process does not resume). After AckWait
// the message is redelivered to consumer B, which gets ErrKeyInUse
// (NakWithDelay) until A's lease ends, then claims the key and runs the
// handler: the ledger, written at the handler's end, holds one entry.
func TestDeadConsumerLeaseTakeover(t *testing.T) {
	t.Parallel()
	const (
		ackWait = 300 * time.Millisecond
		lease   = 1500 * time.Millisecond // outlives AckWait: B meets A's claim
	)
	b := startBroker(t)
	mem := testkit.NewMemoryStore(t)
	dying := faultstore.New(mem)
	srvA := idempotency.NewServer(dying, idempotency.WithLease(lease), idempotency.WithStoreTimeout(100*time.Millisecond))
	srvB := idempotency.NewServer(mem, idempotency.WithLease(lease))
	res, book := newResults(), &testkit.Ledger{}

	jsA, ncA := b.connectConn()
	started, killed := make(chan struct{}), make(chan struct{})
	a := jetstreamidempotency.NewProcessor(srvA, "orders.ship", func(context.Context, jetstream.Msg) error {
		close(started)
		<-killed // the process is dead: this run never reaches its side effect
		return errors.New("killed")
	})
	consume(t, a, b.consumer(jsA, ackWait, -1))
	t.Cleanup(func() { close(killed) }) // runs before A's Consume is awaited
	b.publish(b.connect(), "order-1", jetstream.MsgIDHeader, "m1")
	<-started
	dying.Down.Store(true) // A's store link is cut: its lease runs out
	ncA.Close()            // and so is its broker link

	bp := jetstreamidempotency.NewProcessor(srvB, "orders.ship", func(_ context.Context, msg jetstream.Msg) error {
		book.Write(body(msg))
		return nil
	}, jetstreamidempotency.WithResults(res.Add), jetstreamidempotency.WithRetryDelay(100*time.Millisecond))
	consume(t, bp, b.consumer(b.connect(), ackWait, -1))

	ran, before := res.Wait(t, "of B's run", func(r jetstreamidempotency.Result) bool { return r.Ran })
	if ran.Err != nil || ran.Action != jetstreamidempotency.Ack || ran.SettleErr != nil {
		t.Fatalf("B's run: %+v; want acked", ran)
	}
	if len(before) == 0 {
		t.Fatal("B ran the message at its first delivery; want ErrKeyInUse while A's lease lived")
	}
	for _, r := range before {
		if !errors.Is(r.Err, idempotency.ErrKeyInUse) || r.Ran || r.Action != jetstreamidempotency.NakWithDelay {
			t.Fatalf("B before the lease ended: %+v; want ErrKeyInUse, nakked with delay", r)
		}
	}
	if n := book.Count("order-1"); n != 1 {
		t.Fatalf("ledger: order-1 written %d times, want 1", n)
	}
}
