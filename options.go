package idempotency

import (
	"fmt"

	"github.com/grpc-idempotency/idempotency/internal/mdkey"
)

// ServerOption configures the server side: [NewServer] and
// [UnaryServerInterceptor] take it. Every server option (WithLease,
// WithScope, ...) returns one, and so does every [Option].
type ServerOption interface {
	applyToServer(*config)
}

// ClientOption configures the client side: [UnaryClientInterceptor] and
// [StreamClientInterceptor] take it. Every client option (WithMaxAttempts, WithBackoff, ...) returns one,
// and so does every [Option].
type ClientOption interface {
	applyToClient(*clientConfig)
}

// Option configures both sides with the same setting, so that a server and
// its clients can share one value: [WithMetadataKey] and [WithDefaultMode].
// It is a [ServerOption] for [NewServer] and [UnaryServerInterceptor] and a
// [ClientOption] for [UnaryClientInterceptor].
type Option interface {
	ServerOption
	ClientOption
}

// serverOptionFunc is a [ServerOption] that is a function of the server's
// configuration.
type serverOptionFunc func(*config)

func (f serverOptionFunc) applyToServer(c *config) { f(c) }

// clientOptionFunc is a [ClientOption] that is a function of the client's
// configuration.
type clientOptionFunc func(*clientConfig)

func (f clientOptionFunc) applyToClient(c *clientConfig) { f(c) }

// optionFunc is an [Option]: a function of the settings both sides have.
type optionFunc func(*sharedConfig)

func (f optionFunc) applyToServer(c *config)       { f(&c.sharedConfig) }
func (f optionFunc) applyToClient(c *clientConfig) { f(&c.sharedConfig) }

// sharedConfig holds the settings of the options that configure both
// sides, and the first configuration error an option found.
type sharedConfig struct {
	metadataKey string
	defaultMode Mode // of methods no proto option (or code policy) gives one
	// err is the first configuration error an option found, naming it.
	err error
}

// invalid records a configuration error of option, unless one was found
// before: the interceptor's constructor panics with the first.
func (c *sharedConfig) invalid(option, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("idempotency: "+option+": "+format, args...)
	}
}

// validate returns the first configuration error an option recorded.
func (c *sharedConfig) validate() error { return c.err }

// WithMetadataKey carries the key under metadata key name instead of
// [MetadataKey] ("idempotency-key"): a server reads it there, a client
// sends it there, and also looks there for a key the caller already put in
// the outgoing metadata. Give the server and its clients the same name. The
// name is lower-cased as gRPC metadata keys are; after that it must be a
// gRPC metadata name the key can travel under as text: only a-z, 0-9, '-',
// '_' and '.', no "-bin" suffix and no "grpc-" prefix. Any other name, or
// an empty one, makes [UnaryServerInterceptor] and
// [UnaryClientInterceptor] panic. Default [MetadataKey].
func WithMetadataKey(name string) Option {
	return optionFunc(func(c *sharedConfig) {
		key, err := mdkey.Check(name)
		if err != nil {
			c.invalid("WithMetadataKey", "%w", err)
			return
		}
		c.metadataKey = key
	})
}

// WithDefaultMode sets the mode of the methods that neither an
// idempotency.v1.method option nor, on a server, [WithMethodPolicy] gives
// one: [ModeOptional] deduplicates their keyed calls, [ModeRequired]
// refuses their calls without a key, [ModeDisabled] leaves them alone
// (annotated methods only). NO_SIDE_EFFECTS methods and gRPC's own
// services stay disabled whatever the default. A client applies it to the
// methods whose descriptor in protoregistry.GlobalFiles gives no mode, or
// that the registry does not have. Any other mode makes the interceptors
// panic. Default [ModeOptional]. See [the proto guide].
//
// [the proto guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/proto.md#the-options
func WithDefaultMode(mode Mode) Option {
	return optionFunc(func(c *sharedConfig) {
		if !defaultable(mode) {
			c.invalid("WithDefaultMode", "mode must be ModeOptional, ModeRequired or ModeDisabled, got Mode(%d)", int(mode))
		}
		c.defaultMode = mode
	})
}

// defaultable reports whether a default mode can be mode.
func defaultable(mode Mode) bool {
	return mode == ModeOptional || mode == ModeRequired || mode == ModeDisabled
}
