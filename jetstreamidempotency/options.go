package jetstreamidempotency

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

type config struct {
	key        KeyFunc
	progress   time.Duration // 0: a third of the consumer's AckWait
	retryDelay time.Duration // 0: the server's RetryAfter
	ackStored  bool
	conn       *nats.Conn // nil: Term without a reason
	results    func(Result)
}

// Option configures a [Processor].
type Option func(*config)

// WithKey sets the function that gives a message's idempotency key.
// Default [MsgKey] (the Nats-Msg-Id header, or the stream and stream
// sequence); use [HeaderKey] for a business id. A message whose key
// function fails is terminated. It panics when key is nil.
func WithKey(key KeyFunc) Option {
	if key == nil {
		panic("jetstreamidempotency: WithKey: the key function is nil")
	}
	return func(c *config) { c.key = key }
}

// WithProgressEvery sets how often the Processor sends InProgress for a
// message whose handler is running. Default: a third of the consumer's
// AckWait. A negative d sends none: a handler that runs past AckWait then
// sees its message redelivered, and the claim holds the duplicate off. It
// panics when d is zero.
func WithProgressEvery(d time.Duration) Option {
	if d == 0 {
		panic("jetstreamidempotency: WithProgressEvery: the interval is zero (negative disables progress)")
	}
	return func(c *config) { c.progress = d }
}

// WithRetryDelay sets the NakWithDelay delay of a message whose key is in
// flight elsewhere, or whose store is unavailable or full. Default: the
// idempotency server's [idempotency.Server.RetryAfter] (its
// WithRetryAfter, one second by default). It panics when d is not
// positive.
func WithRetryDelay(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("jetstreamidempotency: WithRetryDelay: the delay is %v (want > 0)", d))
	}
	return func(c *config) { c.retryDelay = d }
}

// WithAckStoredErrors acks a message whose delivery ran the handler to a
// stored (deterministic) error, or got one back, instead of terminating
// it: for consumers that keep their own record of failures. Either way
// the message is not delivered again. Default: Term.
func WithAckStoredErrors() Option {
	return func(c *config) { c.ackStored = true }
}

// WithResults calls f with the [Result] of every delivery, after the
// message is settled. f runs on the delivering goroutine; keep it short.
// Default: none. It panics when f is nil.
func WithResults(f func(Result)) Option {
	if f == nil {
		panic("jetstreamidempotency: WithResults: the function is nil")
	}
	return func(c *config) { c.results = f }
}

// WithConn sets the connection whose server the Processor asks, before it
// terminates a message, which Term it supports: a server from 2.10.4 on
// gets TermWithReason, with the error as the reason, which its
// MSG_TERMINATED advisory carries for a dead-letter process; an older one
// ignores TermWithReason (it would redeliver the message every AckWait),
// so it gets Term, whose advisory has no reason. The server is asked
// at every Term, so a reconnection to another version is followed. Give
// the connection the consumer was made on (jetstream.JetStream's Conn);
// in a cluster under a rolling upgrade from a version before 2.10.4, leave
// it out until every server runs 2.10.4 or later, since the server that
// settles a message may not be the one the connection reached. Default:
// none, and every message is terminated with Term. It panics when nc is
// nil.
func WithConn(nc *nats.Conn) Option {
	if nc == nil {
		panic("jetstreamidempotency: WithConn: the connection is nil")
	}
	return func(c *config) { c.conn = nc }
}
