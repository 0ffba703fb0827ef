package jetstreamidempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
)

// TestFetchBatchRecordByRecord: a batch of five fetched at once is
// processed message by message. The third panics: it alone is nakked
// (ErrHandlerPanicked, its claim released) and comes back in the next
// fetch, while the other four are acked on their own and never run again.
// MaxDeliver 2 ends the poisoned message's redeliveries.
func TestFetchBatchRecordByRecord(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	srv, book := testkit.NewConsumerServer(t), &testkit.Ledger{}
	var mu sync.Mutex
	runs := map[string]int{}
	p := jetstreamidempotency.NewProcessor(srv, "orders.ship", func(_ context.Context, msg jetstream.Msg) error {
		mu.Lock()
		runs[body(msg)]++
		mu.Unlock()
		if body(msg) == "order-3" {
			panic("a poisoned message")
		}
		book.Write(body(msg))
		return nil
	})
	js := b.connect()
	cons := b.consumer(js, ackWait, 2)
	for i := 1; i <= 5; i++ {
		b.publish(js, fmt.Sprintf("order-%d", i), jetstream.MsgIDHeader, fmt.Sprintf("m%d", i))
	}

	first, err := p.Fetch(t.Context(), cons, 5, jetstream.FetchMaxWait(testkit.ConsumerWait))
	if err != nil || len(first) != 5 {
		t.Fatalf("first fetch: %d results, %v; want 5", len(first), err)
	}
	for i, r := range first {
		want := jetstreamidempotency.Ack
		if i == 2 {
			want = jetstreamidempotency.Nak
			if !errors.Is(r.Err, jetstreamidempotency.ErrHandlerPanicked) {
				t.Errorf("poisoned message: %v, want ErrHandlerPanicked", r.Err)
			}
		}
		if !r.Ran || r.Action != want || r.SettleErr != nil {
			t.Errorf("message %d: %+v; want run, %v", i+1, r, want)
		}
	}
	second, err := p.Fetch(t.Context(), cons, 1, jetstream.FetchMaxWait(testkit.ConsumerWait))
	if err != nil || len(second) != 1 {
		t.Fatalf("second fetch: %d results, %v; want 1", len(second), err)
	}
	if r := second[0]; r.Key != "msg-id:m3" || r.Delivery != 2 || !r.Ran || r.Action != jetstreamidempotency.Nak {
		t.Fatalf("second fetch: %+v; want the poisoned message again, run and nakked", r)
	}
	last, err := p.Fetch(t.Context(), cons, 5, jetstream.FetchMaxWait(ackWait))
	if err != nil || len(last) != 0 {
		t.Fatalf("after MaxDeliver: %d results, %v; want none", len(last), err)
	}
	for i := 1; i <= 5; i++ {
		id, wantRuns, wantWrites := fmt.Sprintf("order-%d", i), 1, 1
		if i == 3 {
			wantRuns, wantWrites = 2, 0
		}
		if runs[id] != wantRuns || book.Count(id) != wantWrites {
			t.Errorf("%s: ran %d times, written %d; want %d, %d", id, runs[id], book.Count(id), wantRuns, wantWrites)
		}
	}
}
