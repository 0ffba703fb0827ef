package jetstreamidempotency

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Consume processes the messages of cons, one at a time, until ctx ends;
// then it stops pulling, waits for the message in hand to be settled, and
// returns nil. It returns an error only when the subscription cannot
// start. opts are passed to cons.Consume: with a slow handler keep
// PullMaxMessages small, since buffered messages wait unacknowledged and
// their AckWait runs (a buffered message redelivered elsewhere is not run
// twice, only delivered twice). Run Consume several times, on one
// connection or many, for concurrency.
func (p *Processor) Consume(ctx context.Context, cons jetstream.Consumer, opts ...jetstream.PullConsumeOpt) error {
	progress := p.progressFor(cons)
	var mu sync.Mutex // held while a message is processed
	stopped := false
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if stopped { // left unsettled: JetStream redelivers it after AckWait
			return
		}
		p.process(ctx, msg, progress)
	}, opts...)
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Stop()
	mu.Lock()
	stopped = true
	mu.Unlock()
	return nil
}

// Fetch fetches a batch of up to n messages from cons and processes them
// record by record, in order: each message is claimed, run and settled on
// its own, so one that fails (an error, a panic) is nakked or terminated
// alone, and the others are acked and never run again. It returns each
// message's Result, and the error of the fetch itself. opts are passed to
// cons.Fetch. The batch's later messages wait while the earlier ones run:
// keep n times the handler's duration under AckWait.
func (p *Processor) Fetch(ctx context.Context, cons jetstream.Consumer, n int, opts ...jetstream.FetchOpt) ([]Result, error) {
	progress := p.progressFor(cons)
	batch, err := cons.Fetch(n, opts...)
	if err != nil {
		return nil, err
	}
	var results []Result
	for msg := range batch.Messages() {
		results = append(results, p.process(ctx, msg, progress))
	}
	return results, batch.Error()
}

// progressFor returns the InProgress interval for cons's messages.
func (p *Processor) progressFor(cons jetstream.Consumer) time.Duration {
	if p.cfg.progress != 0 {
		return p.cfg.progress
	}
	if every := cons.CachedInfo().Config.AckWait / 3; every > 0 {
		return every
	}
	return -1 // no AckWait: nothing to hold
}
