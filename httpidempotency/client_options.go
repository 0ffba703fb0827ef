package httpidempotency

import (
	"context"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/grpc-idempotency/idempotency/internal/clientretry"
)

// ClientOption configures [Transport]. Every client option
// ([WithMaxAttempts], [WithBackoff], ...) returns one, and so does every
// [SharedOption].
type ClientOption interface {
	applyToClient(*clientConfig)
}

// clientOptionFunc is a [ClientOption] that is a function of the client's
// configuration.
type clientOptionFunc func(*clientConfig)

func (f clientOptionFunc) applyToClient(c *clientConfig) { f(c) }

// RetryHook is called by [Transport] just before each retry of a request
// starts, after the wait: req is the caller's request, attempt the number
// of the attempt about to start (2 for the first retry), and the answer
// that caused the retry is either resp, whose body is already closed but
// whose status and headers can be read, or err, when no response came.
type RetryHook func(req *http.Request, attempt int, resp *http.Response, err error)

type clientConfig struct {
	sharedConfig
	maxAttempts int
	backoff     clientretry.Backoff
	maxPushback time.Duration
	onRetry     RetryHook
	newKey      func() string
}

func newClientConfig(opts []ClientOption) *clientConfig {
	c := &clientConfig{
		sharedConfig: newSharedConfig(),
		maxAttempts:  clientretry.DefaultMaxAttempts,
		backoff:      clientretry.FullJitter(clientretry.DefaultBackoffBase, clientretry.DefaultBackoffMax),
		maxPushback:  clientretry.DefaultMaxPushback,
		newKey:       uuid.NewString,
	}
	for _, o := range opts {
		o.applyToClient(c)
	}
	c.maxAttempts = max(c.maxAttempts, 1)
	c.maxPushback = max(c.maxPushback, 0)
	if c.newKey == nil {
		c.newKey = uuid.NewString
	}
	return c
}

// WithMaxAttempts sets how many attempts [Transport] makes of a request at
// most, the first one included: WithMaxAttempts(1) never retries. Values
// below 1 mean 1. Default [clientretry.DefaultMaxAttempts] (5), as for the
// gRPC client.
func WithMaxAttempts(n int) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.maxAttempts = n })
}

// WithoutRetry makes [Transport] only give requests their keys and never
// retry, for use above a RoundTripper that retries on its own (pass that
// one as the base, so that every attempt it makes carries the key). It is
// WithMaxAttempts(1). Default: retries on.
func WithoutRetry() ClientOption {
	return WithMaxAttempts(1)
}

// WithBackoff sets the wait before each retry; attempt is 1 before the
// first retry. A go-grpc-middleware retry.BackoffFunc can be passed as is,
// as to the gRPC client's idempotency.WithBackoff. The server's
// Retry-After raises the wait when it is longer. A nil backoff retries at
// once unless the server asks for a wait. Default: exponential with full
// jitter, a random wait between 0 and
// [clientretry.DefaultBackoffBase]·2^attempt, at most
// [clientretry.DefaultBackoffMax].
func WithBackoff(backoff func(ctx context.Context, attempt uint) time.Duration) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.backoff = backoff })
}

// WithMaxPushback caps the wait a server may ask for with Retry-After
// before a retry. A server that asks for a longer wait, or sends a
// Retry-After that is neither a number of seconds nor an HTTP date, ends
// the retries: [Transport] returns that response at once instead of
// waiting, so that a broken or hostile server cannot park a request that
// has no deadline. A wait of exactly d is honoured. Negative values mean
// 0: any positive Retry-After ends the retries. The cap applies to the
// server's Retry-After only, never to the backoff. Default
// [clientretry.DefaultMaxPushback] (1 minute), as for the gRPC client.
func WithMaxPushback(d time.Duration) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.maxPushback = d })
}

// WithOnRetry sets a hook called just before each retry starts, after the
// wait. Default: none.
func WithOnRetry(hook RetryHook) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.onRetry = hook })
}

// WithKeyGenerator sets the function that mints a key for a request that
// has none. It is called once per logical request, before the first
// attempt; a key it returns that [idempotency.ValidateKey] refuses fails
// the request with a [*idempotency.KeyError] before any attempt. A nil
// generate means the default: uuid.NewString from github.com/google/uuid
// (a random UUIDv4).
func WithKeyGenerator(generate func() string) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.newKey = generate })
}
