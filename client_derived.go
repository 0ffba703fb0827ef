package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"io"
	"strconv"
	"sync"
)

// derivedKeyDomain separates derived keys from every other hash of a store
// key. Changing it changes every derived key, so that a handler re-run by
// a new version after a crash would charge a payment provider again: it is
// fixed forever.
const derivedKeyDomain = "grpc-idempotency derived key v1"

// DerivedKey returns the idempotency key a handler sends with a call it
// makes to another system under label: a payment provider's HTTP
// Idempotency-Key header, another gRPC service's key ([WithKey]). It
// reports false when ctx carries no claim (the call is not deduplicated:
// no key, method disabled, or failing open; see [ClaimFromContext]).
//
// The key is derived from the claim's store key (which hashes the method,
// the caller's scope and the client's key) and label, and from nothing
// else: not from the owner token, the server or the time. A handler that
// runs again for the same key, on this server or on another after a crash
// and a lease takeover, gets the same key for the same label, so its
// downstream call replays instead of running twice. Keys differ for
// different labels, methods, scopes and client keys, so two tenants that
// send the same key never share a downstream key, and a handler that
// makes two distinct calls names them with two labels. Every derived key
// passes [ValidateKey]: 43 characters of base64url (unpadded SHA-256).
//
// [WithDerivedKeys] makes [UnaryClientInterceptor] send such keys on its
// own, labelled by called method and call ordinal.
func DerivedKey(ctx context.Context, label string) (string, bool) {
	c, ok := ctx.Value(claimKey{}).(*call)
	if !ok {
		return "", false
	}
	return deriveKey(c.key, label), true
}

// deriveKey hashes the domain, the store key and the label, each prefixed
// with its length so that no two triples hash the same bytes.
func deriveKey(storeKey, label string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, s := range [...]string{derivedKeyDomain, storeKey, label} {
		_, _ = h.Write(binary.AppendUvarint(n[:0], uint64(len(s))))
		_, _ = io.WriteString(h, s)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// newKey returns the key of a call that brings none: derived from the
// claim on ctx with [WithDerivedKeys], else a fresh one.
func (c *clientInterceptor) newKey(ctx context.Context, method string) string {
	if c.cfg.derivedKeys {
		if claimed, ok := ctx.Value(claimKey{}).(*call); ok {
			return deriveKey(claimed.key, method+"#"+strconv.Itoa(claimed.derived.next(method)))
		}
	}
	return c.cfg.newKey()
}

// derivedCalls counts, per called method, the outgoing calls of one
// execution that took a derived key.
type derivedCalls struct {
	mu sync.Mutex
	n  map[string]int
}

// next returns the ordinal of the next call to method: 1, 2, ...
func (d *derivedCalls) next(method string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[method]++
	return d.n[method]
}
