package main

import (
	"context"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// anonymous is the principal of callers without a token when an
// [authenticator] lets them in.
const anonymous = "anonymous"

// authenticator maps bearer tokens in the "authorization" metadata to
// principals (tenants), for go-grpc-middleware's auth interceptor. The
// principal then scopes idempotency keys ([principalScope]): two tenants
// sending the same key get their own answers.
type authenticator struct {
	// tokens maps a bearer token to its principal.
	tokens map[string]string
	// allowAnonymous lets callers without a token in as [anonymous], so
	// that grpcurl commands against -listen stay short. A real payments
	// service refuses them.
	allowAnonymous bool
}

type principalKey struct{}

// authenticate is an auth.AuthFunc: it puts the caller's principal in ctx,
// or fails with UNAUTHENTICATED.
func (a authenticator) authenticate(ctx context.Context) (context.Context, error) {
	token, err := auth.AuthFromMD(ctx, "bearer")
	if status.Code(err) == codes.Unauthenticated && a.allowAnonymous && !hasAuthorization(ctx) {
		return context.WithValue(ctx, principalKey{}, anonymous), nil
	}
	if err != nil {
		return nil, err
	}
	principal, ok := a.tokens[token]
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unknown bearer token")
	}
	return context.WithValue(ctx, principalKey{}, principal), nil
}

// hasAuthorization reports whether the caller sent authorization metadata.
func hasAuthorization(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, "authorization")) > 0
}

// principalFrom returns the principal [authenticator.authenticate] put in
// ctx.
func principalFrom(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(principalKey{}).(string)
	return p, ok
}

// principalScope is the idempotency.WithScope function: the caller's
// principal. A call that reached the interceptor without one is a wiring
// mistake (auth must run first), refused rather than given a shared scope.
func principalScope(ctx context.Context) (string, error) {
	p, ok := principalFrom(ctx)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "no principal: the auth interceptor must run before idempotency")
	}
	return p, nil
}

// bearerToken is a grpc.PerRPCCredentials that sends a bearer token.
type bearerToken string

// GetRequestMetadata returns the authorization metadata.
func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

// RequireTransportSecurity reports false: the example talks plaintext over
// loopback. Use TLS and return true in a real client.
func (bearerToken) RequireTransportSecurity() bool { return false }
