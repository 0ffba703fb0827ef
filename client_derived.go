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
// makes to another system under label (a payment provider's
// Idempotency-Key header, another gRPC service's key with [WithKey]),
// derived from the claim's store key and label alone: a run of the handler
// again for the same key, on any server, gets the same key for the same
// label, so its downstream call replays; other labels, methods, scopes and
// client keys get other keys. The key passes [ValidateKey]. It reports
// false when ctx carries no claim ([ClaimFromContext]). See
// [the client guide].
//
// [the client guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/client.md#keys-for-downstream-calls
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
