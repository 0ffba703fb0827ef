package kafkaidempotency_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
)

// TestStuckPartitionDoesNotHoldOthers: a member stops polling while a
// partition's goroutine holds many records not yet processed (the client
// then fetches no more, and keeps what it fetched), but a partition stuck
// retrying a record is paused instead, so the other partitions go on:
// partition 0's first record fails until released, its 2500 records
// behind it wait, and the records produced on partition 1 meanwhile are
// processed and committed. Once released, partition 0's records run, in
// order, each once.
func TestStuckPartitionDoesNotHoldOthers(t *testing.T) {
	t.Parallel()
	const behind = 2500 // more than a partition's goroutine holds before polling waits
	k := startCluster(t, 2)
	res := newResults()
	var mu sync.Mutex
	stuck := true
	next := 0 // partition 0's next record, checking the order
	p := kafkaidempotency.NewProcessor(testkit.NewConsumerServer(t), "orders.ship", func(_ context.Context, rec *kgo.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if rec.Partition != 0 {
			return nil
		}
		if string(rec.Value) == "stuck" {
			if stuck {
				return status.Error(codes.Unavailable, "the warehouse is down")
			}
			return nil
		}
		if want := strconv.Itoa(next); string(rec.Value) != want {
			t.Errorf("partition 0 ran %s, want %s", rec.Value, want)
		}
		next++
		return nil
	}, kafkaidempotency.WithResults(func(r kafkaidempotency.Result) {
		if string(r.Record.Value) == "stuck" {
			res.Add(r)
		}
	}), kafkaidempotency.WithMaxAttempts(1_000_000), kafkaidempotency.WithBackoff(20*time.Millisecond, 20*time.Millisecond))
	recs := []*kgo.Record{{Topic: topic, Partition: 0, Value: []byte("stuck")}}
	for i := range behind {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(strconv.Itoa(i))})
	}
	if err := k.prod.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	k.run(p, group)
	for range 5 { // the record is stuck, and its partition's records are fetched behind it
		if r, _ := res.Wait(t, "of the stuck record", func(kafkaidempotency.Result) bool { return true }); r.Action != kafkaidempotency.Retry {
			t.Fatalf("the stuck record: %+v, want retried", r)
		}
	}
	for i := range 10 {
		k.produce(1, "p1-"+strconv.Itoa(i))
	}
	k.waitCommitted(group, 1, 10)
	if got := k.committed(group, 0); got > 0 {
		t.Fatalf("partition 0 committed %d past its stuck record", got)
	}
	mu.Lock()
	stuck = false
	mu.Unlock()
	k.waitCommitted(group, 0, behind+1)
	mu.Lock()
	defer mu.Unlock()
	if next != behind {
		t.Fatalf("partition 0 ran %d of its %d records", next, behind)
	}
}
