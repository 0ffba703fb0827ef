package admin

import (
	"context"
	"log/slog"
)

// AuthorizeFunc decides whether the caller of ctx may call method, the full
// name of an admin RPC ("/idempotency.admin.v1.AdminService/PurgeKey"), and
// names the caller: the principal that the purge log lines record. It
// runs first in every RPC, before any argument is read. An error refuses
// the call: a gRPC status error (status.Error) reaches the caller as it is,
// UNAUTHENTICATED say, and any other error as PERMISSION_DENIED, without
// its text. Read the caller from ctx as the server authenticates it: its
// mTLS certificate (peer.FromContext), or the identity an authentication
// interceptor put there.
type AuthorizeFunc func(ctx context.Context, method string) (principal string, err error)

// Option configures [NewService].
type Option func(*config)

type config struct {
	log     *slog.Logger
	invalid []string // the options that cannot work, for the panic
}

// WithLogger sets the logger of the purge lines: one line per purge, made
// or refused, saying who (the principal), which store key, which state,
// whether it was forced and fenced by an etag, and for a refusal why.
// Default slog.Default(); nil panics.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l == nil {
			c.invalid = append(c.invalid, "admin: WithLogger: the logger must not be nil")
			return
		}
		c.log = l
	}
}
