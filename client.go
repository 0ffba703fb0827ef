package idempotency

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// UnaryClientInterceptor returns a client interceptor that gives each call
// one idempotency key ([WithKey], the outgoing metadata, the request's
// key_field, or a new one) and retries it with that key when a retry is
// safe: UNAVAILABLE, [ErrKeyInUse], [ErrStoreFull], and an attempt cut by
// [WithPerAttemptTimeout], up to [WithMaxAttempts]. A key [ValidateKey]
// refuses, or keys that disagree, fail the call with [ErrKeyInvalid]; an
// error carrying the library's ErrorInfo matches its sentinel with
// errors.Is. Methods that get no key (NO_SIDE_EFFECTS, MODE_DISABLED,
// gRPC's own services) pass through. It panics on a configuration error.
// The rest is in [the client guide].
//
// [the client guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/client.md
func UnaryClientInterceptor(opts ...ClientOption) grpc.UnaryClientInterceptor {
	return newClientInterceptor(opts).intercept
}

// StreamClientInterceptor returns the client interceptor of streaming
// calls: each client-streaming or server-streaming call gets one key and
// is retried with it as [UnaryClientInterceptor] does a unary call, with
// the same options, so that the caller sees one stream. A cut server
// stream resumes after the messages received ([ResumeAfterKey]; the server
// needs [Server.StreamServerInterceptor]); a client stream is resent from
// copies held up to [WithMaxStreamRetryBuffer]. Bidirectional streams pass
// through. It panics on a configuration error. The rest is in
// [the streaming guide].
//
// [the streaming guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/streaming.md#the-client-side
func StreamClientInterceptor(opts ...ClientOption) grpc.StreamClientInterceptor {
	return newClientInterceptor(opts).interceptStream
}

// newClientInterceptor returns the client interceptor configured by opts,
// which both [UnaryClientInterceptor] and [StreamClientInterceptor] are
// methods of. It panics on a configuration error.
func newClientInterceptor(opts []ClientOption) *clientInterceptor {
	c := &clientInterceptor{cfg: newClientConfig(opts)}
	if err := c.cfg.validate(); err != nil {
		panic(err)
	}
	c.methods.Store(&map[string]*clientMethod{})
	return c
}

// WithKey makes a call use key as its idempotency key instead of a fresh
// one, for example a key stored with the operation so that a retry after a
// crash reuses it. Only [UnaryClientInterceptor] reads it: on a connection
// without the interceptor, gRPC ignores the option and the call goes out
// with no key at all, silently (a MODE_REQUIRED method then answers
// INVALID_ARGUMENT with [ErrKeyMissing], an optional one runs without
// deduplication). Such clients use [ContextWithKey]. On methods that get
// no key (see [UnaryClientInterceptor]) it is ignored. On a method with a
// key_field whose request sets it, key must be that value. Default: none:
// the request's key field, else a key the interceptor mints.
func WithKey(key string) grpc.CallOption {
	return keyCallOption{key: key}
}

// ContextWithKey returns a copy of ctx whose outgoing metadata carries key
// under [MetadataKey], for clients that call without
// [UnaryClientInterceptor], on which [WithKey] sends nothing. Every call
// made with the returned context carries the key: retry a call with the
// same context, or with the same key, to get its stored answer. With the
// interceptor on the connection the key is kept too, as any key already
// in the outgoing metadata is. For a server built with [WithMetadataKey],
// put the key under that name with metadata.AppendToOutgoingContext.
//
// It checks the key locally, as the server would: when key fails
// [ValidateKey], or when the outgoing metadata of ctx already carries
// another key, or more than one, under [MetadataKey] (the server refuses a
// call with two keys), it returns ctx unchanged and a [*KeyError] of
// [ErrKeyInvalid]. A ctx that already carries the same key is returned as
// it is.
func ContextWithKey(ctx context.Context, key string) (context.Context, error) {
	if err := ValidateKey(key); err != nil {
		return ctx, err
	}
	switch md := metadata.ValueFromOutgoingContext(ctx, MetadataKey); {
	case len(md) > 1:
		return ctx, &KeyError{Err: ErrKeyInvalid, Detail: "the outgoing metadata carries more than one key"}
	case len(md) == 1 && md[0] != key:
		return ctx, &KeyError{Err: ErrKeyInvalid, Detail: "the outgoing metadata carries a different key"}
	case len(md) == 1:
		return ctx, nil
	}
	return metadata.AppendToOutgoingContext(ctx, MetadataKey, key), nil
}

// keyCallOption carries the key of [WithKey] to the interceptor; gRPC
// itself ignores it.
type keyCallOption struct {
	grpc.EmptyCallOption
	key string
}

type clientInterceptor struct {
	cfg clientConfig

	// methods maps a full method name to what the interceptor knows of it.
	// It is copied on write (once per method), so the hot path is one map
	// read without locks or allocations.
	methods atomic.Pointer[map[string]*clientMethod]
	mu      sync.Mutex // serialises writers of methods
}
