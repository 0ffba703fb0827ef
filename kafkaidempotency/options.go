package kafkaidempotency

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of the options.
const (
	// DefaultMaxAttempts is how many times a record's handler may fail
	// with a retryable error before the record is dead-lettered.
	DefaultMaxAttempts = 10
	// DefaultBackoffMin and DefaultBackoffMax bound the wait before a
	// record whose handler failed runs again: it doubles from the first
	// to the second.
	DefaultBackoffMin = 100 * time.Millisecond
	DefaultBackoffMax = 10 * time.Second
)

// maxBuffered is how many records a partition's goroutine holds, not yet
// processed, before polling waits for it (or, when it is retrying a
// record, fetching from its partition pauses).
const maxBuffered = 2000

type config struct {
	key         KeyFunc
	maxAttempts int
	backoffMin  time.Duration
	backoffMax  time.Duration
	retryDelay  time.Duration // 0: the server's RetryAfter
	deadLetter  func(ctx context.Context, rec *kgo.Record, err error) error
	results     func(Result)
}

// Option configures a [Processor].
type Option func(*config)

// WithKey sets the function that gives a record's idempotency key. Default
// [OffsetKey] (topic, partition and offset); use [HeaderKey] for a
// business id. A record whose key function fails is dead-lettered. It
// panics when key is nil.
func WithKey(key KeyFunc) Option {
	if key == nil {
		panic("kafkaidempotency: WithKey: the key function is nil")
	}
	return func(c *config) { c.key = key }
}

// WithMaxAttempts sets how many times a record's handler may fail with a
// retryable error (one the server does not store, or a panic) before the
// record is dead-lettered and its partition goes on. Default
// [DefaultMaxAttempts]. A key in flight elsewhere and a store that is down
// or full are not failed runs: those are tried again for as long as it
// takes. It panics when n is below 1.
func WithMaxAttempts(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("kafkaidempotency: WithMaxAttempts: %d attempts (want at least 1)", n))
	}
	return func(c *config) { c.maxAttempts = n }
}

// WithBackoff sets the wait before a record whose handler failed with a
// retryable error runs again: first after the first failure, doubling up
// to limit. The partition's later records wait too, since Kafka commits
// are positional. Default [DefaultBackoffMin] to [DefaultBackoffMax]. It
// panics when first is not positive or limit is below first.
func WithBackoff(first, limit time.Duration) Option {
	if first <= 0 || limit < first {
		panic(fmt.Sprintf("kafkaidempotency: WithBackoff: %v to %v (want 0 < first <= limit)", first, limit))
	}
	return func(c *config) { c.backoffMin, c.backoffMax = first, limit }
}

// WithRetryDelay sets the wait before a record is tried again when its key
// is in flight elsewhere, or the store is unavailable or full. Default:
// the idempotency server's [idempotency.Server.RetryAfter] (its
// WithRetryAfter, one second by default). It panics when d is not
// positive.
func WithRetryDelay(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("kafkaidempotency: WithRetryDelay: the delay is %v (want > 0)", d))
	}
	return func(c *config) { c.retryDelay = d }
}

// WithDeadLetter sets the function that takes a record whose outcome is
// final but not a success: the handler's stored error (on the delivery
// that ran it, or replayed to a later one), a record without a key or with
// a key reused for another value, or a record whose handler failed
// [WithMaxAttempts] times (err then wraps [ErrAttemptsExhausted] and the
// last error). Produce it to a dead-letter topic, for instance. Once f
// returns nil the record's offset is marked for commit; an error of f is
// retried after the retry delay, until f succeeds or the partition is
// revoked. Default: none, the record is committed past and reported in its
// [Result] only. It panics when f is nil.
func WithDeadLetter(f func(ctx context.Context, rec *kgo.Record, err error) error) Option {
	if f == nil {
		panic("kafkaidempotency: WithDeadLetter: the function is nil")
	}
	return func(c *config) { c.deadLetter = f }
}

// WithResults calls f with the [Result] of every attempt at a record. f
// runs on the partition's goroutine; keep it short. Default: none. It
// panics when f is nil.
func WithResults(f func(Result)) Option {
	if f == nil {
		panic("kafkaidempotency: WithResults: the function is nil")
	}
	return func(c *config) { c.results = f }
}
