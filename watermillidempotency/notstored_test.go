package watermillidempotency_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/watermillidempotency"
)

// TestOutcomeNotStoredAcked, over RabbitMQ: the handler ran and
// succeeded, and the store failed every Complete until the store timeout
// (decision 9). The message is acked all the same (decision 270): the
// work is done, and a nack would only run it a second time once the
// claim's lease ends; the next delivery is the sentinel published after
// it, not a redelivery. A second publication of the order (another UUID,
// the same Order-Id) finds the claim in flight and is nacked after the
// delay until the lease ends, then runs the handler again, since no
// outcome was stored; a third finds that run's outcome.
func TestOutcomeNotStoredAcked(t *testing.T) {
	t.Parallel()
	u := rabbitURL(t)
	topic := uniqueName("orders")
	fs := faultstore.New(testkit.NewMemoryStore(t))
	fs.FailCompletes(1 << 30)
	srv := idempotency.NewServer(fs, idempotency.WithLease(testkit.ConsumerLease), idempotency.WithStoreTimeout(100*time.Millisecond))
	res := newResults()
	var runs atomic.Int64
	startConsumer(t, u, topic, func(msg *message.Message) ([]*message.Message, error) {
		if string(msg.Payload) == "order-7" {
			runs.Add(1)
		}
		return nil, nil
	}, watermillidempotency.Middleware(srv, watermillidempotency.WithResults(res.Add), watermillidempotency.WithKey(watermillidempotency.MetadataKey("Order-Id")),
		watermillidempotency.WithRetryDelay(50*time.Millisecond)))
	pub := publisher(t, u)

	publish(t, pub, topic, "m1", "order-7", "Order-Id", "7")
	publish(t, pub, topic, "s1", "sentinel", "Order-Id", "s1")
	first, _ := res.Wait(t, "of the first message", func(watermillidempotency.Result) bool { return true })
	if payload(first) != "order-7" || !first.Ran || first.Err != nil || first.Action != watermillidempotency.Ack {
		t.Fatalf("first: %+v; want order-7 run and acked", first)
	}
	if n := fs.Count("complete"); n == 0 {
		t.Fatal("no Complete was tried")
	}
	if next, _ := res.Wait(t, "of the sentinel", func(watermillidempotency.Result) bool { return true }); payload(next) != "sentinel" {
		t.Fatalf("after order-7: %+v; want the sentinel, not a redelivery", next)
	}

	fs.FailCompletes(0)
	publish(t, pub, topic, "m2", "order-7", "Order-Id", "7")
	second, held := res.Wait(t, "of the second message's run", func(r watermillidempotency.Result) bool { return r.Ran })
	if payload(second) != "order-7" || second.Err != nil || second.Action != watermillidempotency.Ack {
		t.Fatalf("second: %+v; want order-7 run again and acked", second)
	}
	for _, r := range held {
		if r.Action != watermillidempotency.NackAfterDelay || r.Ran {
			t.Errorf("before the lease ended: %+v; want nacked after the delay, not run", r)
		}
	}
	publish(t, pub, topic, "m3", "order-7", "Order-Id", "7")
	third, _ := res.Wait(t, "of the third message", func(watermillidempotency.Result) bool { return true })
	if third.Ran || third.Err != nil || third.Action != watermillidempotency.Ack {
		t.Fatalf("third: %+v; want the stored outcome, acked", third)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2", n)
	}
}
