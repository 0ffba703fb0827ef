package idempotency

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/grpc-idempotency/idempotency/internal/clientretry"
)

// Defaults of the client options, which each option's doc comment states.
const (
	// defaultMaxAttempts, defaultBackoffBase, defaultBackoffMax and
	// defaultMaxPushback are the HTTP client's too (internal/clientretry).
	defaultMaxAttempts = clientretry.DefaultMaxAttempts
	defaultBackoffBase = clientretry.DefaultBackoffBase
	defaultBackoffMax  = clientretry.DefaultBackoffMax
	defaultMaxPushback = clientretry.DefaultMaxPushback
	// defaultMaxStreamRetryBuffer is how many bytes of a client-streaming
	// call's requests [StreamClientInterceptor] holds for its retries; see
	// [WithMaxStreamRetryBuffer].
	defaultMaxStreamRetryBuffer = 1 << 20
)

type clientConfig struct {
	sharedConfig
	maxAttempts       int
	perAttemptTimeout time.Duration
	backoff           func(ctx context.Context, attempt uint) time.Duration
	onRetry           func(ctx context.Context, attempt int, err error)
	newKey            func() string
	maxPushback       time.Duration
	derivedKeys       bool // [WithDerivedKeys]
	maxStreamBuffer   int  // [WithMaxStreamRetryBuffer]
}

func newClientConfig(opts []ClientOption) clientConfig {
	c := clientConfig{
		maxAttempts:     defaultMaxAttempts,
		backoff:         clientretry.FullJitter(defaultBackoffBase, defaultBackoffMax),
		newKey:          uuid.NewString,
		maxPushback:     defaultMaxPushback,
		maxStreamBuffer: defaultMaxStreamRetryBuffer,
		sharedConfig:    sharedConfig{metadataKey: MetadataKey, defaultMode: ModeOptional},
	}
	for _, o := range opts {
		o.applyToClient(&c)
	}
	c.maxAttempts = max(c.maxAttempts, 1)
	c.perAttemptTimeout = max(c.perAttemptTimeout, 0)
	c.maxPushback = max(c.maxPushback, 0)
	if c.backoff == nil {
		c.backoff = func(context.Context, uint) time.Duration { return 0 }
	}
	if c.newKey == nil {
		c.newKey = uuid.NewString
	}
	return c
}

// WithMaxAttempts sets how many attempts a call makes at most, the first
// one included: WithMaxAttempts(1) never retries. Values below 1 mean 1.
// Default 5.
func WithMaxAttempts(n int) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.maxAttempts = n })
}

// WithoutRetry makes [UnaryClientInterceptor] only attach keys and never
// retry, for use before another retry layer such as go-grpc-middleware's
// retry.UnaryClientInterceptor or under grpc-go's native retryPolicy. It is
// WithMaxAttempts(1). Default: retries on.
func WithoutRetry() ClientOption {
	return WithMaxAttempts(1)
}

// WithPerAttemptTimeout bounds each attempt by d, within the caller's own
// deadline. An attempt that runs out of its time is retried with the same
// key (the server either replays its outcome, rejects the retry as in
// flight, or has released the claim), unless the caller's deadline has
// passed. Default 0: attempts are bounded by the caller's deadline only.
func WithPerAttemptTimeout(d time.Duration) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.perAttemptTimeout = d })
}

// WithBackoff sets the wait before each retry; attempt is 1 before the
// first retry. A go-grpc-middleware retry.BackoffFunc can be passed as is,
// for example retry.BackoffExponentialWithJitter(100*time.Millisecond, 0.2).
// The server's pushback (google.rpc.RetryInfo or the grpc-retry-pushback-ms
// trailer) raises the wait when it is longer. A nil backoff retries at once
// unless the server asks for a wait. Default: exponential with full jitter,
// a random wait between 0 and 50ms·2^attempt, at most 5s.
func WithBackoff(backoff func(ctx context.Context, attempt uint) time.Duration) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.backoff = backoff })
}

// WithOnRetry sets a hook called just before each retry starts, after the
// wait, with the number of the attempt about to start (2 for the first
// retry) and the error that caused it. Default: none.
func WithOnRetry(hook func(ctx context.Context, attempt int, err error)) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.onRetry = hook })
}

// WithKeyGenerator sets the function that mints a key for a call that has
// none. It is called once per logical call, before the first attempt; a
// key it returns that [ValidateKey] refuses fails the call with
// INVALID_ARGUMENT. Default uuid.NewString from github.com/google/uuid (a
// random UUIDv4).
func WithKeyGenerator(generate func() string) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.newKey = generate })
}

// WithMaxPushback caps the wait a server may ask for before a retry, with
// google.rpc.RetryInfo or the grpc-retry-pushback-ms trailer. A server that
// asks for a longer wait (or sends a RetryInfo that is not a valid
// duration) ends the retries: the call returns that attempt's error at
// once instead of waiting, so a broken or hostile server cannot park a
// call, and its goroutine, that has no deadline. A wait of exactly d is
// honoured. Negative values mean 0: any positive pushback ends the
// retries. The cap applies to the server's pushback only, never to the
// backoff set with [WithBackoff]. Default 1 minute.
func WithMaxPushback(d time.Duration) ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.maxPushback = d })
}

// WithMaxStreamRetryBuffer bounds the copies of a client-streaming call's
// requests that [StreamClientInterceptor] holds so that it can send them
// again on a retry, at n bytes (each message counting its encoded size
// plus 5 bytes for its gRPC frame header, as the server's
// [WithMaxStreamRequestBytes] counts them). A call whose requests go past
// the bound drops its copies and is no longer retried: its first failure
// is returned, as without the interceptor. 0 holds nothing, so no
// client-streaming call is retried; a negative n makes
// [StreamClientInterceptor] panic. A server-streaming call's one request
// is always held. Default 1 MiB.
func WithMaxStreamRetryBuffer(n int) ClientOption {
	return clientOptionFunc(func(c *clientConfig) {
		if n < 0 {
			c.invalid("WithMaxStreamRetryBuffer", "the bound must not be negative, got %d", n)
			return
		}
		c.maxStreamBuffer = n
	})
}

// WithDerivedKeys makes [UnaryClientInterceptor] give a call that brings
// no key of its own, made from a claimed handler's context, a key derived
// from that claim ([DerivedKey]) instead of a fresh one, labelled with the
// called method and the call's ordinal among that execution's calls to it
// ("/shop.v1.PaymentsService/Charge#1", then "#2"). A re-run of the
// handler that makes the same calls in the same order sends the same
// keys. Calls made concurrently, or by a retry loop above the interceptor,
// need a label of their own: WithKey(DerivedKey(ctx, label)). Default:
// off. The rest is in [the client guide].
//
// [the client guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/client.md#keys-for-downstream-calls
func WithDerivedKeys() ClientOption {
	return clientOptionFunc(func(c *clientConfig) { c.derivedKeys = true })
}
