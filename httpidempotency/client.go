package httpidempotency

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/grpc-idempotency/idempotency"
)

// Transport returns an http.RoundTripper that gives each request of its
// methods one idempotency key and retries the request, with that same
// key, when a retry is safe: the client side of [Middleware], as
// idempotency.UnaryClientInterceptor is of the gRPC server interceptor.
// Requests go out through base, http.DefaultTransport when base is nil:
//
//	client := &http.Client{Transport: httpidempotency.Transport(nil)}
//
// A request of its methods ([WithMethods]: POST and PATCH by default)
// carries its key in the [KeyHeader] header ([WithKeyHeader]). The key is
// the one the caller set in that header, under any spelling of its name
// (req.Header["idempotency-key"] included), sent as the caller wrote it
// (a bare token or a Structured Field string, [ParseKey]) under the
// name's canonical spelling alone; else the one
// [ContextWithKey] put in the request's context; else, for a request that
// http.Client sends on after a 307 or 308 redirect, the key the
// redirected request carried; else a fresh one from the key generator
// ([WithKeyGenerator], a random UUIDv4 by default), sent as a bare token,
// or as a Structured Field string when the bare token would read as one
// ("k1" in double quotes), so that the server reads that key.
// It is chosen once, before the first attempt, so every attempt carries
// it. A key that [idempotency.ValidateKey] refuses, two header lines
// (under one spelling of the name or two), or a
// header and a context that carry different keys fail the request with a
// [*idempotency.KeyError] before any attempt. Requests of other methods
// go to base untouched, without a key or retries.
//
// An attempt is retried when it got no response at all (the connection
// was refused, reset or closed, the attempt timed out, as with base's
// ResponseHeaderTimeout), except for a certificate or TLS record error,
// which a retry cannot fix; when it got 409 with this library's problem
// whose reason is [idempotency.ErrKeyInUse] (the request is still in
// flight on the server); and when it got 503 Service Unavailable. Nothing
// else is retried: no other 409, which also means a business conflict;
// no 429, which asks this client to send less, as the gRPC client does
// not retry a plain RESOURCE_EXHAUSTED; no other 4xx or 5xx; and no
// response marked [ReplayedHeader]: true, which a retry would only get
// again. Retries wait for the backoff ([WithBackoff]) or the server's
// Retry-After, in seconds or an HTTP date, whichever is longer, and stop
// after [WithMaxAttempts] attempts. A Retry-After longer than
// [WithMaxPushback] (1 minute by default) or malformed, or a wait that
// would end at or after the request context's deadline, ends the retries
// at once: the last answer is returned as it came. A context cancelled
// during a wait ends the request with the context's error. The body of a
// response that is retried is read to its end (up to a bound) and closed;
// the last answer is returned with its body unread.
//
// Each retry sends the request body again from req.GetBody, which
// http.NewRequest sets for a body of *bytes.Buffer, *bytes.Reader or
// *strings.Reader. A request with a body and no GetBody is sent once: an
// attempt that would have been retried returns its response as it came,
// or its error wrapped with [ErrNotRewindable].
//
// The request's context bounds everything. There is no per-attempt
// timeout option: give base one (http.Transport's ResponseHeaderTimeout),
// and its timeout is retried.
//
// The RoundTripper closes base's idle connections on CloseIdleConnections,
// so http.Client.CloseIdleConnections reaches base. It panics when an
// option cannot work, naming the option.
func Transport(base http.RoundTripper, opts ...ClientOption) http.RoundTripper {
	c := newClientConfig(opts)
	if err := errors.Join(c.configErrors...); err != nil {
		panic(err)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base, c: c}
}

// ErrNotRewindable wraps the error of an attempt that [Transport] would
// have retried, but could not: the request has a body and no GetBody to
// send it again.
var ErrNotRewindable = errors.New("httpidempotency: not retried: the request body cannot be sent again (the request has no GetBody)")

// contextKey is the context key of [ContextWithKey].
type contextKey struct{}

// ContextWithKey returns a copy of ctx that carries key: a request of
// [Transport]'s methods made with it and without a key header of its own
// sends key, on every attempt. Every such request made with the returned
// context carries the key, so use it for one logical request, for example
// with a key saved with the operation it stands for, so that a retry after
// a crash reuses it. A request whose key header carries another key fails
// before any attempt. Without [Transport], nothing reads it.
//
// It checks the key as the middleware would: when key fails
// [idempotency.ValidateKey], or ctx already carries another key, it
// returns ctx unchanged and a [*idempotency.KeyError] whose reason is
// [idempotency.ErrKeyInvalid]. A ctx that already carries the same key
// is returned as it is.
func ContextWithKey(ctx context.Context, key string) (context.Context, error) {
	if err := idempotency.ValidateKey(key); err != nil {
		return ctx, err
	}
	switch had, ok := ctx.Value(contextKey{}).(string); {
	case ok && had != key:
		return ctx, keyInvalid("the context already carries another key")
	case ok:
		return ctx, nil
	}
	return context.WithValue(ctx, contextKey{}, key), nil
}

func keyInvalid(detail string) error {
	return &idempotency.KeyError{Err: idempotency.ErrKeyInvalid, Detail: detail}
}

type transport struct {
	base http.RoundTripper
	c    *clientConfig
}

// RoundTrip sends req with its key, and retries it as [Transport] says.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.c.methods[req.Method] {
		return t.base.RoundTrip(req)
	}
	first, err := t.withKey(req)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on errors
		}
		return nil, err
	}
	if t.c.maxAttempts == 1 {
		return t.base.RoundTrip(first)
	}
	return t.retry(req, first)
}

// CloseIdleConnections closes the idle connections of the base
// RoundTripper, when it has any.
func (t *transport) CloseIdleConnections() {
	if b, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		b.CloseIdleConnections()
	}
}

// withKey returns req carrying its key: req itself when the caller set the
// key header under its canonical name, else a shallow copy with a header
// of its own, which carries the key under the canonical name alone.
func (t *transport) withKey(req *http.Request) (*http.Request, error) {
	name := t.c.header
	ctxKey, inCtx := req.Context().Value(contextKey{}).(string)
	lines, exact := keyLines(req.Header, name)
	var line string
	switch {
	case len(lines) > 1:
		return nil, keyInvalid("more than one " + name + " header")
	case len(lines) == 1:
		key := ParseKey(lines[0])
		if err := idempotency.ValidateKey(key); err != nil {
			return nil, err
		}
		if inCtx && ctxKey != key {
			return nil, keyInvalid("the " + name + " header and the request's context carry different keys")
		}
		if exact {
			return req, nil
		}
		line = lines[0] // sent as written, under the canonical name
	case inCtx:
		line = keyLine(ctxKey) // checked by ContextWithKey
	default:
		key := redirectedKey(req, name)
		if key == "" {
			key = t.c.newKey()
		}
		if err := idempotency.ValidateKey(key); err != nil {
			return nil, err
		}
		line = keyLine(key)
	}
	out := req.WithContext(req.Context()) // a shallow copy
	out.Header = make(http.Header, len(req.Header)+1)
	for k, vs := range req.Header {
		if len(k) != len(name) || !strings.EqualFold(k, name) {
			out.Header[k] = vs
		}
	}
	out.Header[name] = []string{line}
	return out, nil
}

// redirectedKey returns the key that the request req follows a redirect
// of carried, "" when req is not sent after a redirect: http.Client makes
// a new request for each redirect, with the caller's headers but not those
// a RoundTripper set, and a 307 or 308 asks for the same request again,
// elsewhere.
func redirectedKey(req *http.Request, name string) string {
	if req.Response == nil || req.Response.Request == nil {
		return ""
	}
	lines, _ := keyLines(req.Response.Request.Header, name)
	if len(lines) != 1 {
		return ""
	}
	return ParseKey(lines[0])
}
