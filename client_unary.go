package idempotency

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

func (c *clientInterceptor) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return clientError(c.invoke(ctx, method, req, reply, cc, invoker, opts))
}

// invoke makes the call, with its key and retries when it gets a key.
func (c *clientInterceptor) invoke(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	invoker = reportReplayed(invoker, opts)
	m := c.method(method, req)
	if !m.keyed {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx, err := c.attachKey(ctx, method, m.fieldKey(req), opts)
	if err != nil {
		return err
	}
	if c.cfg.maxAttempts == 1 && c.cfg.perAttemptTimeout == 0 {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	return c.invokeWithRetry(ctx, method, req, reply, cc, invoker, opts)
}

// attachKey returns ctx with the call's key in its outgoing metadata. A key
// already there is kept as is. field is the value of the request's key
// field, or "": without WithKey or a metadata key it is the call's key, and
// with one of them it must be that key. A call with none of them gets
// [clientInterceptor.newKey].
func (c *clientInterceptor) attachKey(ctx context.Context, method, field string, opts []grpc.CallOption) (context.Context, error) {
	var key string
	var fromOption bool
	for _, o := range opts {
		if k, ok := o.(keyCallOption); ok {
			key, fromOption = k.key, true
		}
	}
	md := metadata.ValueFromOutgoingContext(ctx, c.cfg.metadataKey)
	switch {
	case len(md) > 1:
		return ctx, keyInvalid("the outgoing metadata carries more than one key")
	case len(md) == 1 && fromOption && md[0] != key:
		return ctx, keyInvalid("WithKey and the outgoing metadata carry different keys")
	case len(md) == 1:
		key = md[0]
	case !fromOption && field != "":
		key = field
	case !fromOption:
		key = c.newKey(ctx, method)
	}
	if field != "" && key != field {
		return ctx, keyInvalid("WithKey or the outgoing metadata and the request's key_field carry different keys")
	}
	if err := ValidateKey(key); err != nil {
		return ctx, keyStatus(err)
	}
	if len(md) == 1 {
		return ctx, nil
	}
	return metadata.AppendToOutgoingContext(ctx, c.cfg.metadataKey, key), nil
}

func keyInvalid(detail string) error {
	return keyStatus(&KeyError{Err: ErrKeyInvalid, Detail: detail})
}

// keyStatus turns a key error found on the client into the status the
// server would have returned for it: INVALID_ARGUMENT with an ErrorInfo.
func keyStatus(err error) error {
	if err == nil {
		return nil
	}
	f, _ := failureOf(err) // a *KeyError is always one of the key failures
	return &statusError{err: statusOf(f, err, 0).Err(), cause: err}
}
