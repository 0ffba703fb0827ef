package kafkaidempotency_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
)

// TestOffsetKey: the default key is the record's topic, partition and
// offset; one that is not a valid idempotency key is replaced by its
// SHA-256.
func TestOffsetKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("t", 249)
	sum := sha256.Sum256([]byte(long + "/7/1042"))
	for _, tt := range []struct {
		rec  kgo.Record
		want string
	}{
		{kgo.Record{Topic: "orders", Partition: 3, Offset: 1042}, "orders/3/1042"},
		{kgo.Record{Topic: long, Partition: 7, Offset: 1042}, "sha256:" + hex.EncodeToString(sum[:])},
	} {
		if got, err := kafkaidempotency.OffsetKey(&tt.rec); got != tt.want || err != nil {
			t.Errorf("OffsetKey(%s/%d/%d) = %q, %v; want %q", tt.rec.Topic[:6], tt.rec.Partition, tt.rec.Offset, got, err, tt.want)
		}
	}
}

// TestHeaderKey: keyed on a business id (HeaderKey("Order-Id")), a fact
// produced twice as two records runs once: the second finds the first's
// outcome and is committed. The id reused for another value is refused
// (ErrKeyReused) and a record without the header has no key: both are
// dead-lettered, not run, and committed past.
func TestHeaderKey(t *testing.T) {
	t.Parallel()
	k := startCluster(t, 1)
	book, res, dead := &testkit.Ledger{}, newResults(), &deadLetters{}
	p := kafkaidempotency.NewProcessor(testkit.NewConsumerServer(t), "orders.ship", func(_ context.Context, rec *kgo.Record) error {
		book.Write(string(rec.Value))
		return nil
	}, kafkaidempotency.WithResults(res.Add), dead.option(), kafkaidempotency.WithKey(kafkaidempotency.HeaderKey("Order-Id")))
	k.produce(0, "order-7", "Order-Id", "7")
	k.produce(0, "order-7", "Order-Id", "7")                  // the producer sent the fact twice
	k.produce(0, "order-7, another product", "Order-Id", "7") // a producer bug
	k.produce(0, "order-8", "order-id", "8")                  // another header
	k.run(p, group)
	k.waitCommitted(group, 0, 4)

	got := res.Drain()
	want := []struct {
		key    string
		ran    bool
		err    error
		action kafkaidempotency.Action
	}{
		{"Order-Id:7", true, nil, kafkaidempotency.Commit},
		{"Order-Id:7", false, nil, kafkaidempotency.Commit},
		{"Order-Id:7", false, idempotency.ErrKeyReused, kafkaidempotency.DeadLetter},
		{"", false, idempotency.ErrKeyMissing, kafkaidempotency.DeadLetter},
	}
	if len(got) != len(want) {
		t.Fatalf("results %+v, want %d", got, len(want))
	}
	for i, w := range want {
		if r := got[i]; r.Key != w.key || r.Ran != w.ran || !errors.Is(r.Err, w.err) || (w.err == nil) != (r.Err == nil) || r.Action != w.action {
			t.Errorf("record %d: %+v; want key %q, ran %v, %v, %v", i, r, w.key, w.ran, w.err, w.action)
		}
	}
	if n := book.Count("order-7"); n != 1 {
		t.Errorf("order-7 ran %d times, want 1", n)
	}
	if recs, _ := dead.got(); len(recs) != 2 {
		t.Errorf("dead letters %v, want the reused id and the record without a key", recs)
	}
}
