package httpidempotency

import (
	"net/http"
	"net/textproto"
	"strings"

	"github.com/grpc-idempotency/idempotency"
)

// Defaults of the middleware's options.
const (
	// KeyHeader is the request header that carries the key by default.
	KeyHeader = "Idempotency-Key"
	// ReplayedHeader is "true" on a response that the middleware replayed
	// from its store instead of running the handler, and absent from every
	// live answer.
	ReplayedHeader = "Idempotent-Replayed"
	// DefaultOperation is the operation keys live in when
	// [WithOperation] does not say.
	DefaultOperation = "http"
	// defaultMaxRequestBytes bounds the request body the middleware reads
	// to fingerprint a keyed request; see [WithMaxRequestBytes].
	defaultMaxRequestBytes = 1 << 20
	// defaultMaxResponseBytes bounds the response body the middleware
	// keeps; see [WithMaxResponseBytes].
	defaultMaxResponseBytes = 4 << 20 // the server's own default
)

// FingerprintFunc returns the bytes of a request that its fingerprint
// covers. body is the request body, read in full; r.Body reads it again.
type FingerprintFunc func(r *http.Request, body []byte) ([]byte, error)

// Option configures [Middleware]. Every middleware option returns one,
// and so does every [SharedOption].
type Option interface {
	applyToMiddleware(*config)
}

// optionFunc is an [Option] that is a function of the middleware's
// configuration.
type optionFunc func(*config)

func (f optionFunc) applyToMiddleware(c *config) { f(c) }

type config struct {
	sharedConfig
	operation   string
	required    bool
	fingerprint FingerprintFunc // nil: method, path and query, body
	maxRequest  int64
	maxResponse int
	keep        func(status int) bool
}

func newConfig(opts []Option) *config {
	c := &config{
		sharedConfig: newSharedConfig(),
		operation:    DefaultOperation,
		maxRequest:   defaultMaxRequestBytes,
		maxResponse:  defaultMaxResponseBytes,
		keep:         DefaultKeep,
	}
	for _, o := range opts {
		o.applyToMiddleware(c)
	}
	return c
}

// WithKeyHeader carries the key in the request header name instead of
// [KeyHeader] ("Idempotency-Key"), for example "webhook-id" for Standard
// Webhooks deliveries: [Middleware] reads it there, and [Transport] sends
// it there and reads a key the caller set there. Give a middleware and its
// clients the same name. The header line is a bare token or a Structured
// Field string ([ParseKey]). A name that is not an HTTP token makes
// [Middleware] and [Transport] panic.
func WithKeyHeader(name string) SharedOption {
	return sharedOptionFunc(func(c *sharedConfig) {
		if !isToken(name) {
			c.invalid("WithKeyHeader", "%q is not a header name", name)
		}
		c.header = textproto.CanonicalMIMEHeaderKey(name)
	})
}

// WithOperation sets the operation the keys live in, [DefaultOperation]
// ("http") by default: a key is claimed once per operation and scope, so
// one key sent to two endpoints under the same middleware is a reused key
// (422), as with Stripe. Give each middleware its own operation to keep
// their keys apart. An empty name, or one that starts with "/" as only a
// gRPC method's does ([idempotency.ValidateOperation]), makes [Middleware]
// panic.
func WithOperation(name string) Option {
	return optionFunc(func(c *config) {
		if name == "" {
			c.invalid("WithOperation", "the operation must not be empty")
		} else if err := idempotency.ValidateOperation(name); err != nil {
			c.invalid("WithOperation", "%v", err)
		}
		c.operation = name
	})
}

// WithMethods sets the request methods the middleware and the transport
// apply to; requests with other methods pass through them untouched.
// Default POST and PATCH. No method, or one that is not an HTTP token,
// makes [Middleware] and [Transport] panic.
func WithMethods(methods ...string) SharedOption {
	return sharedOptionFunc(func(c *sharedConfig) {
		if len(methods) == 0 {
			c.invalid("WithMethods", "no method given")
		}
		c.methods = make(map[string]bool, len(methods))
		for _, m := range methods {
			if !isToken(m) {
				c.invalid("WithMethods", "%q is not a method", m)
			}
			c.methods[m] = true
		}
	})
}

// WithKeyRequired answers a request of the middleware's methods that has
// no key with 400 and [idempotency.ErrKeyMissing]. By default a key is
// optional: such a request runs its handler without a claim.
func WithKeyRequired() Option {
	return optionFunc(func(c *config) { c.required = true })
}

// WithFingerprint sets what of a request its fingerprint covers: the key
// sent with a request whose fn bytes differ is refused as reused (422).
// Default: the method, the path and query, and the body. An error from fn
// is answered 500 and claims nothing; a nil fn makes [Middleware] panic.
func WithFingerprint(fn FingerprintFunc) Option {
	return optionFunc(func(c *config) {
		if fn == nil {
			c.invalid("WithFingerprint", "the function must not be nil")
		}
		c.fingerprint = fn
	})
}

// WithMaxRequestBytes bounds the body of a keyed request, which the
// middleware reads in full to fingerprint it: a longer body is answered
// 413 with [ErrRequestTooLarge], and nothing is claimed. Default 1 MiB;
// n below 0 makes [Middleware] panic.
func WithMaxRequestBytes(n int64) Option {
	return optionFunc(func(c *config) {
		if n < 0 {
			c.invalid("WithMaxRequestBytes", "the bound must not be negative, got %d", n)
		}
		c.maxRequest = n
	})
}

// WithMaxResponseBytes bounds the response body the middleware keeps. The
// live client gets a longer body in full, and its key completes as not
// retained: a retry gets [idempotency.ErrResponseNotRetained]'s problem,
// never a truncated replay. The server's own
// [idempotency.WithMaxResponseBytes] bounds the whole stored outcome as
// well. Default 4 MiB; n below 0 makes [Middleware] panic.
func WithMaxResponseBytes(n int) Option {
	return optionFunc(func(c *config) {
		if n < 0 {
			c.invalid("WithMaxResponseBytes", "the bound must not be negative, got %d", n)
		}
		c.maxResponse = n
	})
}

// WithKeptStatuses sets which responses are kept and replayed: keep
// reports it for a status code. A response it refuses releases the claim,
// so a retry with the same key runs the handler again. Default
// [DefaultKeep]; a nil keep makes [Middleware] panic.
func WithKeptStatuses(keep func(status int) bool) Option {
	return optionFunc(func(c *config) {
		if keep == nil {
			c.invalid("WithKeptStatuses", "the function must not be nil")
		}
		c.keep = keep
	})
}

// DefaultKeep keeps every response below 500 except three kinds, whose
// claim is released so that a retry with the same key runs the handler
// again:
//
//   - 401 Unauthorized, 403 Forbidden, 404 Not Found and 405 Method Not
//     Allowed: the answers of a router or an authentication layer that
//     the middleware wraps, given before any handler started. Kept, they
//     would answer the key for the retention period, after the route is
//     deployed or the client has signed in (Stripe saves a result only
//     once an endpoint started executing).
//   - 307 Temporary Redirect and 308 Permanent Redirect: "send this
//     request again there", so nothing was done here; http.ServeMux
//     answers so a path that lacks its trailing slash, and the client
//     follows with the same key.
//   - 408 Request Timeout, 425 Too Early and 429 Too Many Requests: like
//     the 5xx, they say that a retry may get another answer.
//
// A handler's own 401, 403, 404 or 405 is therefore not kept either:
// place the middleware after routing and authentication, and give
// [WithKeptStatuses] a function that keeps them if the handler acts
// before it answers so.
func DefaultKeep(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect,
		http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status < 500
}

// isToken reports whether s is an RFC 9110 token, as header names and
// methods are.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
