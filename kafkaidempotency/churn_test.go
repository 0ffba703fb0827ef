package kafkaidempotency_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
)

// TestMembersComeAndGo: members join and leave the group while records
// flow through four partitions, so partitions move again and again, some
// while their records run: every record's side effect happens once, and
// every partition's offsets are committed to its end.
func TestMembersComeAndGo(t *testing.T) {
	t.Parallel()
	const parts, perPart = 4, 60
	k := startCluster(t, parts)
	mem, book := testkit.NewMemoryStore(t), &testkit.Ledger{}
	member := func() *kafkaidempotency.Processor { // a process of its own: a server each, one store
		return kafkaidempotency.NewProcessor(idempotency.NewServer(mem, idempotency.WithLease(testkit.ConsumerLease)), "orders.ship",
			func(_ context.Context, rec *kgo.Record) error {
				time.Sleep(time.Millisecond) // the work itself
				book.Write(string(rec.Value))
				return nil
			})
	}
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			for p := range int32(parts) {
				k.produce(p, fmt.Sprintf("p%d-%d", p, i))
			}
		}
	}
	produce(0, perPart/2)
	stopA := k.run(member(), group)
	stopB := k.run(member(), group)
	book.WaitWrites(t, parts*perPart/8)
	stopA() // leaves: its partitions move to B mid-stream
	stopC := k.run(member(), group)
	book.WaitWrites(t, parts*perPart/4)
	stopB()
	produce(perPart/2, perPart)
	k.run(member(), group)
	book.WaitWrites(t, parts*perPart/2)
	stopC()
	for p := range int32(parts) {
		k.waitCommitted(group, p, perPart)
	}
	for p := range parts {
		for i := range perPart {
			if id := fmt.Sprintf("p%d-%d", p, i); book.Count(id) != 1 {
				t.Errorf("%s written %d times, want 1", id, book.Count(id))
			}
		}
	}
}
