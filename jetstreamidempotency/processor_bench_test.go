package jetstreamidempotency_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency"
	"github.com/grpc-idempotency/idempotency/jetstreamidempotency/natstest"
)

// BenchmarkJetStream compares a bare JetStream consumer with the
// Processor on a memory store, each consuming the b.N messages of a stream
// (published before the timer starts, each a new message, so every one is
// executed) from an embedded NATS server on loopback. The bare consumer
// acknowledges each message as the Processor does, with a double ack that
// waits for the server's confirmation, so the Processor's claim, run and
// stored outcome are the only difference: compare the rows of one run.
// msgs/s counts the messages consumed.
func BenchmarkJetStream(b *testing.B) {
	for _, row := range []string{"bare", "executed"} {
		b.Run(row, func(b *testing.B) {
			ctx := context.Background()
			js, cons := benchStream(b)
			var done atomic.Int64
			finished := make(chan struct{})
			count := func() {
				if done.Add(1) == int64(b.N) {
					close(finished)
				}
			}
			b.ResetTimer()
			if row == "bare" {
				cc, err := cons.Consume(func(msg jetstream.Msg) {
					if err := msg.DoubleAck(ctx); err != nil {
						b.Error(err)
					}
					count()
				})
				if err != nil {
					b.Fatal(err)
				}
				<-finished
				b.StopTimer()
				cc.Stop()
			} else {
				p := jetstreamidempotency.NewProcessor(idempotency.NewServer(testkit.NewMemoryStore(b)), "bench.ship",
					func(context.Context, jetstream.Msg) error { return nil },
					jetstreamidempotency.WithResults(func(r jetstreamidempotency.Result) {
						if r.Action != jetstreamidempotency.Ack || !r.Ran {
							b.Errorf("%+v", r)
						}
						count()
					}))
				cctx, cancel := context.WithCancel(ctx)
				stopped := make(chan error, 1)
				go func() { stopped <- p.Consume(cctx, cons) }()
				<-finished
				b.StopTimer()
				cancel()
				if err := <-stopped; err != nil {
					b.Fatal(err)
				}
			}
			_ = js
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// benchStream starts an embedded NATS server with a stream holding b.N
// messages and returns its durable consumer, removed with the server when
// the benchmark ends.
func benchStream(b *testing.B) (jetstream.JetStream, jetstream.Consumer) {
	b.Helper()
	ctx := context.Background()
	ns, err := natstest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}}); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"order":4200}`)
	for i := range b.N {
		if _, err := js.PublishAsync("bench."+strconv.Itoa(i%16), body); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "BENCH", jetstream.ConsumerConfig{Durable: "bench", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	return js, cons
}
