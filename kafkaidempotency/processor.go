package kafkaidempotency

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency"
)

// Handler does the work of one record. It runs at most once per record key
// to completion: a run that returns nil, or an error the idempotency server
// stores, is never repeated for that key. Its context carries the claim
// ([idempotency.ClaimFromContext]) and is cancelled when the claim's lease
// is lost. It must not commit: the Processor does, once the outcome is
// stored.
type Handler func(ctx context.Context, rec *kgo.Record) error

// Processor runs a [Handler] once per record of a Kafka consumer group.
// Build it with [NewProcessor]; run it with [Processor.Run], as many times
// as you like, in one process or many, with one store: each record's
// handler runs once among them.
type Processor struct {
	server  *idempotency.Server
	op      string
	handler Handler
	cfg     config
}

// NewProcessor returns a Processor that runs h once per record key under
// op, the operation name its keys are claimed under in server's store (see
// [idempotency.Do]). Give each kind of work its own op; the server's
// WithOperationPolicy sets op's retention, lease and handler timeout. It
// panics when server or h is nil, op is empty or starts with "/" as only a
// gRPC method's name does ([idempotency.ValidateOperation]), or an option
// is invalid.
func NewProcessor(server *idempotency.Server, op string, h Handler, opts ...Option) *Processor {
	switch {
	case server == nil:
		panic("kafkaidempotency: NewProcessor: the idempotency server is nil")
	case op == "":
		panic("kafkaidempotency: NewProcessor: the operation name is empty")
	case idempotency.ValidateOperation(op) != nil:
		panic("kafkaidempotency: NewProcessor: " + idempotency.ValidateOperation(op).Error())
	case h == nil:
		panic("kafkaidempotency: NewProcessor: the handler is nil")
	}
	cfg := config{
		key: OffsetKey, maxAttempts: DefaultMaxAttempts,
		backoffMin: DefaultBackoffMin, backoffMax: DefaultBackoffMax,
		results: func(Result) {},
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.retryDelay == 0 {
		cfg.retryDelay = server.RetryAfter()
	}
	return &Processor{server: server, op: op, handler: h, cfg: cfg}
}

// Run joins a consumer group with a kgo client built from opts (the seed
// brokers, kgo.ConsumerGroup and kgo.ConsumeTopics or ConsumeRegex, and
// any other client option) and processes its records until ctx ends. Then
// it stops taking records, waits for the records in hand to be settled,
// commits, leaves the group and returns nil. It returns an error when the
// client cannot be built, or has no consumer group.
//
// Run adds the options its guarantee rests on, which replace the same
// options among opts: kgo.AutoCommitMarks (only offsets whose records are
// settled are committed, every kgo.AutoCommitInterval), kgo.BlockRebalanceOnPoll
// (held only while a poll's records are handed to their partitions'
// goroutines, never while a handler runs), and kgo.OnPartitionsAssigned,
// OnPartitionsRevoked and OnPartitionsLost. A handler may take longer than
// the group's session timeout, since kgo heartbeats on its own; a
// rebalance waits for it up to the rebalance timeout (kgo.RebalanceTimeout,
// 60 s by default), after which the group removes this member and the
// claim holds the record's next owner off. Errors of fetches are retried
// by the client and logged by its logger (kgo.WithLogger).
func (p *Processor) Run(ctx context.Context, opts ...kgo.Opt) error {
	r := newRun(ctx, p)
	cl, err := kgo.NewClient(append(opts,
		kgo.AutoCommitMarks(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
	)...)
	if err != nil {
		if lacksGroup(opts) {
			return errNoGroup // kgo refuses our group options without a group
		}
		return fmt.Errorf("kafkaidempotency: Run: %w", err)
	}
	if g, _ := cl.OptValue(kgo.ConsumerGroup).(string); g == "" {
		cl.Close()
		return errNoGroup
	}
	r.cl = cl
	r.poll()
	r.stop()
	cl.CloseAllowingRebalance()
	return nil
}

var errNoGroup = errors.New("kafkaidempotency: Run: the client has no consumer group (kgo.ConsumerGroup)")

// lacksGroup reports whether a client built from opts alone has no
// consumer group (false when opts themselves are invalid).
func lacksGroup(opts []kgo.Opt) bool {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return false
	}
	defer cl.Close()
	g, _ := cl.OptValue(kgo.ConsumerGroup).(string)
	return g == ""
}
