package jetstreamidempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestAbandonedBlockedTerminated (decision 303): a message whose key was
// abandoned (made so through the store: a claim kept after its lease, then
// Abandon), under a server that blocks abandoned keys, is settled as
// SettleReject: terminated, never acked and never redelivered. Its
// handler never runs, even with WithAckStoredErrors (the error is not a
// stored outcome), and the key stays abandoned for an operator.
func TestAbandonedBlockedTerminated(t *testing.T) {
	t.Parallel()
	const op, wait = "orders.ship", 500 * time.Millisecond
	b := startBroker(t)
	mem := testkit.NewMemoryStore(t)
	srv := idempotency.NewServer(mem, idempotency.WithLease(testkit.ConsumerLease), idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	t.Cleanup(func() { _ = srv.Close() })
	sk := testkit.Abandon(t, mem, srv, op, op, "Order-Id:7", wrapperspb.Bytes([]byte("order-7")))
	var runs atomic.Int64
	res := newResults()
	p := jetstreamidempotency.NewProcessor(srv, op, func(context.Context, jetstream.Msg) error {
		runs.Add(1)
		return nil
	}, jetstreamidempotency.WithResults(res.Add), jetstreamidempotency.WithKey(jetstreamidempotency.HeaderKey("Order-Id")),
		jetstreamidempotency.WithAckStoredErrors())
	js := b.connect()
	cons := b.consumer(js, wait, -1)
	consume(t, p, cons)
	b.publish(js, "order-7", "Order-Id", "7")
	first, _ := res.Wait(t, "of the message", func(jetstreamidempotency.Result) bool { return true })
	if first.Ran || !errors.Is(first.Err, idempotency.ErrOutcomeUnknown) || first.Settlement != idempotency.SettleReject ||
		first.Action != jetstreamidempotency.Term || first.SettleErr != nil {
		t.Fatalf("delivery: %+v; want ErrOutcomeUnknown, rejected and terminated, the handler not run", first)
	}
	if info := waitSettled(t, cons, 4*wait); info.NumRedelivered != 0 {
		t.Errorf("consumer info %+v: the terminated message was redelivered", info)
	}
	if again := res.Drain(); len(again) != 0 {
		t.Errorf("delivered again: %+v", again)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
	testkit.WantState(t, mem, sk, store.StateAbandoned)
}
