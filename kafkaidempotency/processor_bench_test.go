package kafkaidempotency_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
)

// BenchmarkKafka compares a bare consumer group member with the Processor
// on a memory store, each consuming the b.N records of a one-partition
// topic (produced before the timer starts, each a new record, so every one
// is executed) from franz-go's in-process cluster (kfake) on loopback. The
// bare member polls and marks each record for kgo's AutoCommitMarks as
// the Processor does, in one goroutine, so the Processor's per-partition
// goroutine, claim, run and stored outcome are the only difference:
// compare the rows of one run. Each row is timed from its first record
// consumed to its last, leaving out the group's join; msgs/s counts the
// records consumed.
func BenchmarkKafka(b *testing.B) {
	for _, row := range []string{"bare", "executed"} {
		b.Run(row, func(b *testing.B) {
			seeds := benchTopic(b)
			opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("bench"), kgo.ConsumeTopics(topic)}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Timed from the first record consumed to the last, so that
			// joining the group is left out: count runs on one goroutine
			// (the poll loop, or the partition's), in offset order.
			var done atomic.Int64
			var first, last time.Time
			count := func() {
				n := done.Add(1)
				if n == 1 {
					first = time.Now()
				}
				if n == int64(b.N) {
					last = time.Now()
					cancel()
				}
			}
			b.ResetTimer()
			if row == "bare" {
				benchBare(b, ctx, opts, count)
			} else {
				p := kafkaidempotency.NewProcessor(idempotency.NewServer(testkit.NewMemoryStore(b)), "bench.ship",
					func(context.Context, *kgo.Record) error { return nil },
					kafkaidempotency.WithResults(func(r kafkaidempotency.Result) {
						if r.Action != kafkaidempotency.Commit || !r.Ran {
							b.Errorf("%+v", r)
						}
						count()
					}))
				if err := p.Run(ctx, opts...); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if n := done.Load(); n != int64(b.N) {
				b.Fatalf("consumed %d records, want %d", n, b.N)
			}
			per := last.Sub(first) / time.Duration(max(b.N-1, 1))
			b.ReportMetric(float64(per.Nanoseconds()), "ns/op")
			b.ReportMetric(float64(time.Second)/float64(max(per, 1)), "msgs/s")
		})
	}
}

// benchBare is a bare group member: it polls, calls a handler that does
// nothing and marks each record, until ctx ends, then commits and leaves.
func benchBare(b *testing.B, ctx context.Context, opts []kgo.Opt, count func()) {
	cl, err := kgo.NewClient(append(opts, kgo.AutoCommitMarks())...)
	if err != nil {
		b.Fatal(err)
	}
	handler := func(context.Context, *kgo.Record) error { return nil }
	for ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, 1000)
		fetches.EachRecord(func(rec *kgo.Record) {
			if err := handler(ctx, rec); err != nil {
				b.Error(err)
			}
			cl.MarkCommitRecords(rec)
			count()
		})
	}
	_ = cl.CommitMarkedOffsets(context.Background())
	cl.Close()
}

// benchTopic starts a cluster with the one-partition topic holding b.N
// records and returns its seed brokers; the cluster is closed when the
// benchmark ends.
func benchTopic(b *testing.B) []string {
	b.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	recs := make([]*kgo.Record, b.N)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(`{"order":4200}`)}
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	return c.ListenAddrs()
}
