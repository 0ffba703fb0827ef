package kafkaidempotency_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestAbandonedBlockedDeadLettered (decision 303): a record whose key was
// abandoned (made so through the store: a claim kept after its lease, then
// Abandon), under a server that blocks abandoned keys, is settled as
// SettleReject on its first attempt, whatever WithMaxAttempts says: it is
// dead-lettered with ErrOutcomeUnknown and committed, not retried in
// place, and the partition goes on. Its handler never runs, and the key
// stays abandoned for an operator.
func TestAbandonedBlockedDeadLettered(t *testing.T) {
	t.Parallel()
	const op = "orders.ship"
	k := startCluster(t, 1)
	mem := testkit.NewMemoryStore(t)
	srv := idempotency.NewServer(mem, idempotency.WithLease(testkit.ConsumerLease), idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	t.Cleanup(func() { _ = srv.Close() })
	sk := testkit.Abandon(t, mem, srv, op, op, "Order-Id:7", wrapperspb.Bytes([]byte("order-7")))
	res, dead := newResults(), &deadLetters{}
	var mu sync.Mutex
	var ran []string
	p := kafkaidempotency.NewProcessor(srv, op, func(_ context.Context, rec *kgo.Record) error {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, string(rec.Value))
		return nil
	}, kafkaidempotency.WithResults(res.Add), dead.option(), kafkaidempotency.WithMaxAttempts(5),
		kafkaidempotency.WithKey(kafkaidempotency.HeaderKey("Order-Id")))
	k.produce(0, "order-7", "Order-Id", "7")
	k.produce(0, "order-8", "Order-Id", "8")
	k.run(p, group)
	k.waitCommitted(group, 0, 2)

	var blocked []kafkaidempotency.Result
	for _, r := range res.Drain() {
		if value(r) == "order-7" {
			blocked = append(blocked, r)
		}
	}
	if len(blocked) != 1 {
		t.Fatalf("order-7: %d attempts %+v, want 1", len(blocked), blocked)
	}
	if r := blocked[0]; r.Ran || !errors.Is(r.Err, idempotency.ErrOutcomeUnknown) || r.Settlement != idempotency.SettleReject ||
		r.Action != kafkaidempotency.DeadLetter {
		t.Fatalf("order-7: %+v; want ErrOutcomeUnknown, rejected and dead-lettered, the handler not run", r)
	}
	recs, errs := dead.got()
	if len(recs) != 1 || recs[0] != "order-7" || !errors.Is(errs[0], idempotency.ErrOutcomeUnknown) {
		t.Fatalf("dead letters %v %v; want order-7 with ErrOutcomeUnknown", recs, errs)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []string{"order-8"}) {
		t.Fatalf("the handler ran for %v, want order-8 alone", ran)
	}
	testkit.WantState(t, mem, sk, store.StateAbandoned)
}
