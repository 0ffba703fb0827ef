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
// interceptor put there. To decide by the scope a request names (an
// operator limited to some tenants), add [WithAuthorizeRequest].
type AuthorizeFunc func(ctx context.Context, method string) (principal string, err error)

// Option configures [NewService].
type Option func(*config)

type config struct {
	log              *slog.Logger
	authorizeRequest func(context.Context, Request) error // nil: none
	invalid          []string                             // the options that cannot work, for the panic
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

// Request is an admin call as [WithAuthorizeRequest] sees it: the method
// and what the request names, known before the service reads anything.
type Request struct {
	// Method is the full name of the admin RPC,
	// "/idempotency.admin.v1.AdminService/PurgeKey".
	Method string
	// Principal is the caller, as the [AuthorizeFunc] named it.
	Principal string
	// AllScopes is true for ListKeys and GetStats: a store lists and
	// counts the entries of every scope together, so these read every
	// tenant's keys. An operator limited to some scopes is refused them.
	AllScopes bool
	// Scope is the scope the request names: its client key's (what the
	// server's WithScope function gives the client), or, with a store
	// key, its scope field, the scope a sealed record is opened for.
	Scope string
	// Name and Key are the method (or operation, or namespace) and the
	// client's key of a request that names a client key; both "" with a
	// store key.
	Name, Key string
	// StoreKey is the store key the request acts on: the one it names,
	// or the one the server derives from its client key
	// ([idempotency.Server.StoreKey]); "" for ListKeys and GetStats.
	StoreKey string
	// ByStoreKey is true when the request names its entry by store key. A
	// store key is a hash and does not say whose entry it is: Scope then
	// says only which scope a sealed record is opened for (a record sealed
	// for another scope does not open), and the entry's state, times and
	// fingerprint, and an unsealed record's outcome, are read whatever its
	// scope. An operator limited to some scopes names keys by client key.
	ByStoreKey bool
}

// WithAuthorizeRequest sets a second authorization function, which
// decides per request: it runs after the [AuthorizeFunc] of [NewService]
// has named the caller and the request's arguments are checked, and
// before anything is read from the store or purged, with the method and
// the scope the request names. An error refuses the call as an
// AuthorizeFunc's does (a gRPC status error as it is, any other as
// PERMISSION_DENIED without its text), and a refused purge is logged as
// one. Use it to limit an operator to some tenants: allow a request whose
// Scope is theirs and that names a client key, and refuse AllScopes and
// ByStoreKey requests ([ExampleWithAuthorizeRequest]). Default: none,
// every request the AuthorizeFunc lets in is allowed; nil panics.
func WithAuthorizeRequest(f func(ctx context.Context, r Request) error) Option {
	return func(c *config) {
		if f == nil {
			c.invalid = append(c.invalid, "admin: WithAuthorizeRequest: the function must not be nil")
			return
		}
		c.authorizeRequest = f
	}
}
