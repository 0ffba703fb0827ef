package idempotency

import (
	"context"
	"time"
)

// Claim identifies the claim a handler runs under, as [ClaimFromContext]
// returns it. (The result of a store's Claim call is a
// [store.ClaimResult].)
type Claim struct {
	// StoreKey is the key the store holds the claim under: a hash of the
	// method (or its namespace, or the operation of [Do]), the scope and the
	// client's idempotency key, never the client's key itself.
	StoreKey string
	// Token is the owner token the store issued for this execution. A
	// handler can pass it to its own systems to fence side effects: a
	// system that accepts writes only under the token of the key's latest
	// claim refuses an execution whose lease was lost and taken over. Tokens
	// are unique per claim; only the memory store's are also ordered.
	Token string
	// Attempt counts the runs of the key under a claim: 1 for the first,
	// 2 or more when an earlier claim of the key was abandoned (its server
	// died or hung past its lease, maybe after the side effect) and this
	// run took it over. A handler that sees Attempt > 1 looks for its own
	// effects before acting again (its ledger row, or a downstream asked
	// with the same [DerivedKey]).
	Attempt int
	// Previous is when the abandoned attempt that this run took over was
	// claimed, by that server's clock; the zero Time on a first attempt
	// and when the store does not know.
	Previous time.Time
}

type claimKey struct{}

// ClaimFromContext returns the claim the handler (or the function [Do] and
// [Once] run) runs under. It reports false when the call is not
// deduplicated (no key, method disabled, or failing open).
func ClaimFromContext(ctx context.Context) (Claim, bool) {
	c, ok := ctx.Value(claimKey{}).(*call)
	if !ok {
		return Claim{}, false
	}
	return c.claim, true
}
