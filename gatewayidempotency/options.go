package gatewayidempotency

import (
	"fmt"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"github.com/grpc-idempotency/idempotency"
)

// defaultRetryAfter is the Retry-After of a 409 or 503 answer whose status
// carries no google.rpc.RetryInfo.
const defaultRetryAfter = time.Second

// Option configures [ServeMuxOptions].
type Option func(*config)

type config struct {
	metadataKey string
	retryAfter  time.Duration
	next        runtime.ErrorHandlerFunc
	nextHeader  runtime.HeaderMatcherFunc
	nextTrailer runtime.HeaderMatcherFunc
	// err is the first configuration error an option found, naming it.
	err error
}

func newConfig(opts []Option) config {
	c := config{
		metadataKey: idempotency.MetadataKey,
		retryAfter:  defaultRetryAfter,
		next:        runtime.DefaultHTTPErrorHandler,
	}
	for _, o := range opts {
		o(&c)
	}
	if c.next == nil {
		c.next = runtime.DefaultHTTPErrorHandler
	}
	if c.nextHeader == nil {
		c.nextHeader = prefixed(runtime.MetadataHeaderPrefix)
	}
	if c.nextTrailer == nil {
		c.nextTrailer = prefixed(runtime.MetadataTrailerPrefix)
	}
	c.retryAfter = max(c.retryAfter, 0)
	return c
}

// WithMetadataKey passes the Idempotency-Key header on under metadata key
// name, to match a server built with [idempotency.WithMetadataKey](name).
// The name is lower-cased as gRPC metadata keys are; a name
// [idempotency.WithMetadataKey] refuses (empty, a character other than
// a-z, 0-9, '-', '_' and '.', a "-bin" suffix or a "grpc-" prefix) makes
// [ServeMuxOptions] panic. Default [idempotency.MetadataKey]
// ("idempotency-key").
func WithMetadataKey(name string) Option {
	return func(c *config) {
		key, err := checkMetadataKey(name)
		if err != nil && c.err == nil {
			c.err = fmt.Errorf("gatewayidempotency: WithMetadataKey: %w", err)
		}
		c.metadataKey = key
	}
}

// WithRetryAfter sets the Retry-After of a 409 answer (key in use) or 503
// answer (store unavailable or full) whose status carries no
// google.rpc.RetryInfo. It is sent in whole seconds, rounded up. Default
// 1s; negative values mean 0.
func WithRetryAfter(d time.Duration) Option {
	return func(c *config) { c.retryAfter = d }
}

// WithErrorHandler sets the handler of every error that is not one of the
// idempotency interceptor's, for a mux that had its own
// runtime.WithErrorHandler: [ServeMuxOptions] installs an error handler, and
// a mux has one. Default runtime.DefaultHTTPErrorHandler.
func WithErrorHandler(next runtime.ErrorHandlerFunc) Option {
	return func(c *config) { c.next = next }
}

// WithOutgoingHeaderMatcher sets the matcher of the server's header
// metadata, for a mux that had its own runtime.WithOutgoingHeaderMatcher:
// [ServeMuxOptions] installs one that forwards no
// [idempotency.ReplayedKey] and passes every other key to match. Default
// grpc-gateway's own mapping, "Grpc-Metadata-" and the key.
func WithOutgoingHeaderMatcher(match runtime.HeaderMatcherFunc) Option {
	return func(c *config) { c.nextHeader = match }
}

// WithOutgoingTrailerMatcher sets the matcher of the server's trailer
// metadata, for a mux that had its own runtime.WithOutgoingTrailerMatcher:
// [ServeMuxOptions] installs one that forwards no
// [idempotency.ReplayedKey] and passes every other key to match. Default
// grpc-gateway's own mapping, "Grpc-Trailer-" and the key.
func WithOutgoingTrailerMatcher(match runtime.HeaderMatcherFunc) Option {
	return func(c *config) { c.nextTrailer = match }
}

// prefixed is grpc-gateway's default outgoing matcher with prefix
// (runtime.MetadataHeaderPrefix or runtime.MetadataTrailerPrefix).
func prefixed(prefix string) runtime.HeaderMatcherFunc {
	return func(key string) (string, bool) { return prefix + key, true }
}
