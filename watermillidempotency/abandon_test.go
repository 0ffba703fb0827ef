package watermillidempotency_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/watermillidempotency"
)

// TestAbandonedBlockedDeadLettered (decision 303), over RabbitMQ: a
// message whose key was abandoned (made so through the store: a claim
// kept after its lease, then Abandon), under a server that blocks
// abandoned keys, is settled as SettleReject: handed to the dead-letter
// function with ErrOutcomeUnknown and acked, not nacked into a
// redelivery loop. The next delivery is the sentinel published after it,
// not a redelivery; the handler never ran for it, and the key stays
// abandoned for an operator.
func TestAbandonedBlockedDeadLettered(t *testing.T) {
	t.Parallel()
	const op = "orders.ship"
	u := rabbitURL(t)
	topic := uniqueName("orders")
	mem := testkit.NewMemoryStore(t)
	srv := idempotency.NewServer(mem, idempotency.WithLease(testkit.ConsumerLease), idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	t.Cleanup(func() { _ = srv.Close() })
	sk := testkit.Abandon(t, mem, srv, op, op, "Order-Id:7", wrapperspb.Bytes([]byte("order-7")))
	res := newResults()
	var runs atomic.Int64
	var mu sync.Mutex
	var dead []error
	startConsumer(t, u, topic, func(msg *message.Message) ([]*message.Message, error) {
		if string(msg.Payload) == "order-7" {
			runs.Add(1)
		}
		return nil, nil
	}, watermillidempotency.Middleware(srv, watermillidempotency.WithOperation(op), watermillidempotency.WithResults(res.Add),
		watermillidempotency.WithKey(watermillidempotency.MetadataKey("Order-Id")),
		watermillidempotency.WithDeadLetter(func(_ *message.Message, err error) error {
			mu.Lock()
			defer mu.Unlock()
			dead = append(dead, err)
			return nil
		})))
	pub := publisher(t, u)
	publish(t, pub, topic, "m1", "order-7", "Order-Id", "7")
	publish(t, pub, topic, "s1", "sentinel", "Order-Id", "s1")
	first, _ := res.Wait(t, "of the first message", func(watermillidempotency.Result) bool { return true })
	if payload(first) != "order-7" || first.Ran || !errors.Is(first.Err, idempotency.ErrOutcomeUnknown) ||
		first.Settlement != idempotency.SettleReject || first.Action != watermillidempotency.DeadLetter {
		t.Fatalf("first: %+v; want order-7 rejected with ErrOutcomeUnknown and dead-lettered, the handler not run", first)
	}
	if next, _ := res.Wait(t, "of the sentinel", func(watermillidempotency.Result) bool { return true }); payload(next) != "sentinel" {
		t.Fatalf("after order-7: %+v; want the sentinel, not a redelivery", next)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dead) != 1 || !errors.Is(dead[0], idempotency.ErrOutcomeUnknown) {
		t.Fatalf("dead letters %v; want one with ErrOutcomeUnknown", dead)
	}
	if n := runs.Load(); n != 0 {
		t.Fatalf("the handler ran %d times for order-7", n)
	}
	testkit.WantState(t, mem, sk, store.StateAbandoned)
}
