package kafkaidempotency_test

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
)

// TestCommitAfterStored: a partition's records run in offset order, each
// committed once its outcome is stored. While the second record's handler
// runs, the group has committed the first record's offset and not the
// second's; once it returns, the second's too. Each ran once.
func TestCommitAfterStored(t *testing.T) {
	t.Parallel()
	k := startCluster(t, 1)
	book := &testkit.Ledger{}
	started, release := make(chan struct{}), make(chan struct{})
	p := kafkaidempotency.NewProcessor(testkit.NewConsumerServer(t), "orders.ship", func(_ context.Context, rec *kgo.Record) error {
		if string(rec.Value) == "order-2" {
			close(started)
			<-release
		}
		book.Write(string(rec.Value))
		return nil
	})
	k.produce(0, "order-1")
	k.produce(0, "order-2")
	k.run(p, group)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release) // a failed test must not hang
		}
	})

	<-started
	if got := k.waitCommitted(group, 0, 1); got != 1 {
		t.Fatalf("committed %d while order-2 runs, want 1: past a record whose outcome is not stored", got)
	}
	close(release)
	k.waitCommitted(group, 0, 2)
	if got, want := book.Writes(), []string{"order-1", "order-2"}; !slices.Equal(got, want) {
		t.Fatalf("ledger %v, want %v", got, want)
	}
}
