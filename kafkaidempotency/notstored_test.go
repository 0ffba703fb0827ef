package kafkaidempotency_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
)

// TestOutcomeNotStoredCommitted: the handler ran and succeeded, and the
// store failed every Complete until the store timeout (decision 9). The
// record is committed all the same (decision 270): the work is done, and
// retrying it in place would only run it a second time once the claim's
// lease ends. A second record of the order (the same Order-Id) finds the
// claim in flight and is retried after the delay until the lease ends,
// then runs the handler again, since no outcome was stored; a third finds
// that run's outcome.
func TestOutcomeNotStoredCommitted(t *testing.T) {
	t.Parallel()
	k := startCluster(t, 1)
	fs := faultstore.New(testkit.NewMemoryStore(t))
	fs.FailCompletes(1 << 30)
	srv := idempotency.NewServer(fs, idempotency.WithLease(testkit.ConsumerLease), idempotency.WithStoreTimeout(100*time.Millisecond))
	res := newResults()
	var runs atomic.Int64
	p := kafkaidempotency.NewProcessor(srv, "orders.ship", func(context.Context, *kgo.Record) error {
		runs.Add(1)
		return nil
	}, kafkaidempotency.WithResults(res.Add), kafkaidempotency.WithKey(kafkaidempotency.HeaderKey("Order-Id")),
		kafkaidempotency.WithRetryDelay(50*time.Millisecond))
	k.produce(0, "order-7", "Order-Id", "7")
	k.run(p, group)

	first, _ := res.Wait(t, "of the first record", func(kafkaidempotency.Result) bool { return true })
	if !first.Ran || first.Err != nil || first.Action != kafkaidempotency.Commit {
		t.Fatalf("first: %+v; want run and committed", first)
	}
	if n := fs.Count("complete"); n == 0 {
		t.Fatal("no Complete was tried")
	}
	k.waitCommitted(group, 0, 1)

	fs.FailCompletes(0)
	k.produce(0, "order-7", "Order-Id", "7")
	second, held := res.Wait(t, "of the second record's run", func(r kafkaidempotency.Result) bool { return r.Ran })
	if second.Err != nil || second.Action != kafkaidempotency.Commit || second.Record.Offset != 1 {
		t.Fatalf("second: %+v; want offset 1 run again and committed", second)
	}
	for _, r := range held {
		if r.Action != kafkaidempotency.Retry || r.Ran || r.Record.Offset != 1 {
			t.Errorf("before the lease ended: %+v; want offset 1 retried without running", r)
		}
	}
	k.produce(0, "order-7", "Order-Id", "7")
	third, _ := res.Wait(t, "of the third record", func(kafkaidempotency.Result) bool { return true })
	if third.Ran || third.Err != nil || third.Action != kafkaidempotency.Commit {
		t.Fatalf("third: %+v; want the stored outcome, committed", third)
	}
	k.waitCommitted(group, 0, 3)
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2", n)
	}
}
