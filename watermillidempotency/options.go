package watermillidempotency

import (
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/grpc-idempotency/idempotency"
)

type config struct {
	op         string // "": the handler's name
	key        KeyFunc
	retryDelay time.Duration // 0: the server's RetryAfter
	deadLetter func(msg *message.Message, err error) error
	results    func(Result)
}

// Option configures [Middleware].
type Option func(*config)

// WithOperation sets the operation name every message's key is claimed
// under (see [idempotency.Do]). Default: the name of the router's handler
// the message is delivered to ([message.HandlerNameFromCtx]), so that each
// handler of a message runs once, whatever the others do; a handler renamed
// finds none of the outcomes stored under its old name. Set it when the
// middleware runs outside a router, or to keep a handler's outcomes across
// a rename. Two handlers must never share an operation: the second would
// find the first's outcome and not run. It panics when op is empty or
// starts with "/" as only a gRPC method's name does
// ([idempotency.ValidateOperation]); a handler named so has its messages
// refused as misconfigured by [idempotency.Do].
func WithOperation(op string) Option {
	if op == "" {
		panic("watermillidempotency: WithOperation: the operation name is empty")
	}
	if err := idempotency.ValidateOperation(op); err != nil {
		panic("watermillidempotency: WithOperation: " + err.Error())
	}
	return func(c *config) { c.op = op }
}

// WithKey sets the function that gives a message's idempotency key.
// Default [UUIDKey]; use [MetadataKey] for a business id. A message whose
// key function fails is dead-lettered and acked. It panics when key is nil.
func WithKey(key KeyFunc) Option {
	if key == nil {
		panic("watermillidempotency: WithKey: the key function is nil")
	}
	return func(c *config) { c.key = key }
}

// WithRetryDelay sets how long the middleware waits before it returns the
// error of a message whose key is in flight on another delivery, or whose
// store is unavailable or full, so that the router's nack does not bring
// the message straight back. Default: the idempotency server's
// [idempotency.Server.RetryAfter] (its WithRetryAfter, one second by
// default). The wait ends early when the message's context does. It
// panics when d is not positive.
func WithRetryDelay(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("watermillidempotency: WithRetryDelay: the delay is %v (want > 0)", d))
	}
	return func(c *config) { c.retryDelay = d }
}

// WithDeadLetter sets the function that takes a message whose outcome is
// final but not a success: the handler's stored error (on the delivery
// that ran it, or replayed to a later one), a message without a key, or
// one whose key was used for another payload. Publish it to a poison
// topic, for instance. Once f returns nil the message is acked; an error
// of f is returned, so the router nacks, and the redelivery, final again,
// calls f again (the handler does not run). Default: none, the message is
// acked and reported in its [Result] only. It panics when f is nil.
func WithDeadLetter(f func(msg *message.Message, err error) error) Option {
	if f == nil {
		panic("watermillidempotency: WithDeadLetter: the function is nil")
	}
	return func(c *config) { c.deadLetter = f }
}

// WithResults calls f with the [Result] of every delivery, before the
// middleware returns to the router. Default: none. It panics when f is
// nil.
func WithResults(f func(Result)) Option {
	if f == nil {
		panic("watermillidempotency: WithResults: the function is nil")
	}
	return func(c *config) { c.results = f }
}
