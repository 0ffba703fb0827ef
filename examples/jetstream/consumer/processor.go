// Package consumer runs a NATS JetStream consumer's handler once per
// message, whatever the redeliveries, with [idempotency.Once]: the
// message's key is claimed in the idempotency store, the handler runs
// under the claim, and the message is acknowledged only after its outcome
// is stored.
//
// A [Processor] takes each delivery from a JetStream consumer
// ([Processor.Consume], or [Processor.Fetch] for a batch) and settles it
// by what [idempotency.Once] returned:
//
//   - done, now or by an earlier delivery: Ack (a double ack, which waits
//     for the server's confirmation);
//   - the key is in flight on another delivery ([idempotency.ErrKeyInUse]),
//     or the store is unavailable or full: NakWithDelay, so the message
//     comes back after the delay and finds the work done, or runs it if
//     the other delivery's claim was released or its lease ran out;
//   - the handler failed with a retryable error, or panicked: Nak, so the
//     message is redelivered and the handler runs again;
//   - the handler failed with a deterministic error (a gRPC status whose
//     code is a stored code; see [WithStoredCodes]), stored and returned
//     to every later delivery: Term with the error as the reason, which
//     stops redelivery and emits JetStream's MSG_TERMINATED advisory for a
//     dead-letter process ([WithAckStoredErrors] acks instead);
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
	"google.golang.org/grpc/codes"

	"github.com/grpc-idempotency/idempotency"
)

// Handler does the work of one message. It runs at most once per message
// key to completion: a run that returns nil, or a deterministic error,
// is never repeated for that key. Its context carries the claim
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
	stored     [17]bool
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
	WithStoredCodes(idempotency.DefaultStoredCodes...)(&cfg)
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

// WithStoredCodes sets the codes of the handler errors the idempotency
// server stores: give the codes of its WithStoredCodes. Such an error is
// final, and its message is terminated (or acked, [WithAckStoredErrors]);
// any other handler error is retryable and its message is nakked. Default
// [idempotency.DefaultStoredCodes].
func WithStoredCodes(cs ...codes.Code) Option {
	var stored [17]bool
	for _, code := range cs {
		if code == codes.OK || int(code) >= len(stored) {
			panic(fmt.Sprintf("consumer: WithStoredCodes: %v is not an error code (want 1..16)", code))
		}
		stored[code] = true
	}
	return func(c *config) { c.stored = stored }
}

// WithAckStoredErrors acks a message whose handler failed with a stored
// (deterministic) error instead of terminating it: for consumers that keep
// their own record of failures. Default: Term.
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
