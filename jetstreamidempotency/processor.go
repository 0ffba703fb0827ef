// Package consumer runs a NATS JetStream consumer's handler once per
// message, whatever the redeliveries, with [idempotency.Once]: the
// message's key is claimed in the idempotency store, the handler runs
// under the claim, and the message is acknowledged only after its outcome
// is stored.
//
// A [Processor] takes each delivery from a JetStream consumer
// ([Processor.Consume], or [Processor.Fetch] for a batch) and settles it
// by what [idempotency.Once] returned (called as [idempotency.Do] with an
// empty response, which also says whether the answer was stored):
//
//   - done, now or by an earlier delivery: Ack (a double ack, which waits
//     for the server's confirmation);
//   - the key is in flight on another delivery ([idempotency.ErrKeyInUse]),
//     or the store is unavailable or full: NakWithDelay, so the message
//     comes back after the delay and finds the work done, or runs it if
//     the other delivery's claim was released or its lease ran out;
//   - the handler failed with an error the idempotency server stores (its
//     WithStoredCodes, asked with [idempotency.Server.StoresError]), or
//     the delivery got such an error back without running: Term with the
//     error as the reason, whatever its code, which stops redelivery and
//     emits JetStream's MSG_TERMINATED advisory for a dead-letter process
//     ([WithAckStoredErrors] acks instead);
//   - the handler failed with any other error, or panicked: Nak, so the
//     message is redelivered at once; the claim was released, and the
//     redelivery runs the handler again;
//   - the message cannot be processed at all (no key, or its key was used
//     for another body: [idempotency.ErrKeyReused]): Term.
//
// While the handler runs, the Processor tells JetStream that the message is
// in progress every third of the consumer's AckWait ([WithProgressEvery]),
// so a handler that runs longer than AckWait keeps its message. It stops
// when the handler returns or when the claim's lease is lost (the
// handler's context is then cancelled): the message can then be
// redelivered, and the claim decides who runs it.
package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/grpc-idempotency/idempotency"
)

// Handler does the work of one message. It runs at most once per message
// key to completion: a run that returns nil, or an error the idempotency
// server stores, is never repeated for that key. Its context carries the claim
// ([idempotency.ClaimFromContext]) and is cancelled when the claim's lease
// is lost. It must not acknowledge msg: the Processor does, once the
// outcome is stored.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// Processor runs a [Handler] once per message of JetStream consumers. Build
// it with [New]; it is safe for concurrent use by any number of
// [Processor.Consume] and [Processor.Fetch] calls, on one or many
// connections.
type Processor struct {
	server  *idempotency.Server
	op      string
	handler Handler
	cfg     config
}

type config struct {
	key        func(jetstream.Msg) (string, error)
	progress   time.Duration
	retryDelay time.Duration
	ackStored  bool
	results    func(Result)
}

// Option configures a [Processor].
type Option func(*config)

// New returns a Processor that runs h once per message key under op, the
// operation name its keys are claimed under in server's store (see
// [idempotency.Once]). Give each kind of work its own op. It panics when
// server or h is nil, op is empty, or an option is invalid.
func New(server *idempotency.Server, op string, h Handler, opts ...Option) *Processor {
	switch {
	case server == nil:
		panic("consumer: New: the idempotency server is nil")
	case op == "":
		panic("consumer: New: the operation name is empty")
	case h == nil:
		panic("consumer: New: the handler is nil")
	}
	cfg := config{key: MsgKey, retryDelay: idempotency.DefaultRetryAfter, results: func(Result) {}}
	for _, o := range opts {
		o(&cfg)
	}
	return &Processor{server: server, op: op, handler: h, cfg: cfg}
}

// WithKey sets the function that gives a message's idempotency key. Default
// [MsgKey] (the Nats-Msg-Id header, or the stream and stream sequence); use
// [HeaderKey] for a business id. A message whose key function fails is
// terminated.
func WithKey(key func(jetstream.Msg) (string, error)) Option {
	if key == nil {
		panic("consumer: WithKey: the key function is nil")
	}
	return func(c *config) { c.key = key }
}

// WithProgressEvery sets how often the Processor sends InProgress for a
// message whose handler is running. Default: a third of the consumer's
// AckWait. A negative d sends none: a handler that runs past AckWait then
// sees its message redelivered, and the claim holds the duplicate off.
func WithProgressEvery(d time.Duration) Option {
	if d == 0 {
		panic("consumer: WithProgressEvery: the interval is zero (negative disables progress)")
	}
	return func(c *config) { c.progress = d }
}

// WithRetryDelay sets the NakWithDelay delay of a message whose key is in
// flight elsewhere, or whose store is unavailable or full. Default
// [idempotency.DefaultRetryAfter]; set it as the server's WithRetryAfter.
func WithRetryDelay(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("consumer: WithRetryDelay: the delay is %v (want > 0)", d))
	}
	return func(c *config) { c.retryDelay = d }
}

// WithAckStoredErrors acks a message whose delivery got the handler's
// stored (deterministic) error back instead of terminating it: for
// consumers that keep their own record of failures. Default: Term.
func WithAckStoredErrors() Option {
	return func(c *config) { c.ackStored = true }
}

// WithResults calls f with the [Result] of every delivery, after the
// message is settled. f runs on the delivering goroutine; keep it short.
// Default: none.
func WithResults(f func(Result)) Option {
	if f == nil {
		panic("consumer: WithResults: the function is nil")
	}
	return func(c *config) { c.results = f }
}
