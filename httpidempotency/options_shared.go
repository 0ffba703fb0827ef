package httpidempotency

import (
	"fmt"
	"net/http"
)

// SharedOption configures both sides with the same setting, so that a
// middleware and its clients can share one value: [WithKeyHeader] and
// [WithMethods]. It is an [Option] for [Middleware] and a [ClientOption]
// for [Transport], as idempotency.Option is for the gRPC server and client.
type SharedOption interface {
	Option
	ClientOption
}

// sharedOptionFunc is a [SharedOption]: a function of the settings both
// sides have.
type sharedOptionFunc func(*sharedConfig)

func (f sharedOptionFunc) applyToMiddleware(c *config)   { f(&c.sharedConfig) }
func (f sharedOptionFunc) applyToClient(c *clientConfig) { f(&c.sharedConfig) }

// sharedConfig holds the settings of the options that configure both
// sides, and the configuration errors every option found.
type sharedConfig struct {
	header       string          // canonical
	methods      map[string]bool // the methods that get a key
	configErrors []error
}

func newSharedConfig() sharedConfig {
	return sharedConfig{
		header:  KeyHeader,
		methods: map[string]bool{http.MethodPost: true, http.MethodPatch: true},
	}
}

// invalid records a configuration error of option: the constructor panics
// with every one found.
func (c *sharedConfig) invalid(option, format string, args ...any) {
	c.configErrors = append(c.configErrors, fmt.Errorf("httpidempotency: "+option+": "+format, args...))
}
