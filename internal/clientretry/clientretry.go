// Package clientretry holds the timing of a retry that the library's
// retrying clients share: the gRPC client interceptors of the root package
// and httpidempotency's Transport. Each client decides for itself what is
// retried and reads the server's pushback from its own wire (a gRPC
// trailer and google.rpc.RetryInfo, an HTTP Retry-After header); how long
// it then waits, and whether the wait may start at all, is decided here
// once.
package clientretry

import (
	"context"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
)

// Backoff returns the wait before the retry that follows attempt number
// attempt (1 before the first retry). go-grpc-middleware's
// retry.BackoffFunc has this type.
type Backoff = func(ctx context.Context, attempt uint) time.Duration

// Defaults both clients share (the gRPC interceptors and httpidempotency's
// transport); each client option's doc comment states them.
const (
	// DefaultMaxAttempts is how many attempts a call gets, the first one
	// included.
	DefaultMaxAttempts = 5
	// DefaultBackoffBase and DefaultBackoffMax shape the default backoff
	// ([FullJitter]): before retry n a random wait between 0 and
	// DefaultBackoffBase·2^n, at most DefaultBackoffMax.
	DefaultBackoffBase = 50 * time.Millisecond
	DefaultBackoffMax  = 5 * time.Second
	// DefaultMaxPushback is the longest wait a server may ask for before a
	// retry. One minute covers every wait the server asks for by default
	// (1 s) and the longest a key stays blocked by a server that died
	// holding it (its 60 s lease).
	DefaultMaxPushback = time.Minute
)

// FullJitter returns exponential backoff with full jitter: before retry n,
// a random wait between 0 and base·2^n, at most maxWait.
func FullJitter(base, maxWait time.Duration) Backoff {
	// A jitter fraction of 1 draws from [0, 2·base·2^(n-1)).
	return retry.BackoffExponentialWithJitterBounded(base, 1, maxWait)
}

// Delay returns the wait before the retry that follows attempt number
// attempt: the backoff (never negative), raised to the server's pushback
// when that is longer (0 when the server asked for none). It reports
// false when there is to be no retry: the pushback is longer than
// maxPushback (a wait of exactly maxPushback is honoured), or the wait
// would end at or after ctx's deadline, so that the next attempt could
// not start in time. A nil backoff waits for the pushback alone.
func Delay(ctx context.Context, backoff Backoff, attempt int, pushback, maxPushback time.Duration) (time.Duration, bool) {
	if pushback > maxPushback {
		return 0, false
	}
	d := max(pushback, 0)
	if backoff != nil {
		d = max(d, backoff(ctx, uint(attempt)))
	}
	if deadline, has := ctx.Deadline(); has && time.Until(deadline) <= d {
		return 0, false
	}
	return d, true
}

// Wait waits for d, or until ctx is done, and then returns ctx's error. It
// returns ctx's error at once when ctx is already done, whatever d.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
