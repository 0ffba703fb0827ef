package idempotency

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/grpc-idempotency/idempotency/internal/seal"
)

// SealingKeySize is the length of a [SealingKey]'s secret: 32 bytes.
const SealingKeySize = 32

// maxSealingKeyID is the length of the longest key ID, in bytes.
const maxSealingKeyID = seal.MaxKeyID

// SealingKey is one key of a [Keyring]: an ID of 1 to 64 bytes, which
// every record it seals and every fingerprint it keys carries in the
// clear, and a 32-byte secret, from which the key of
// each scope (tenant) is derived. Draw the secret from crypto/rand (or a
// KMS) and keep it out of the store.
type SealingKey struct {
	ID     string
	Secret []byte
}

// Keyring holds the keys that seal stored outcomes ([WithSealing]): the
// primary, which seals every new record and keys every new fingerprint,
// and older keys, which still open the records they sealed and still
// match the fingerprints they keyed, so that keys rotate without losing an
// outcome. A Keyring is immutable; build another to rotate.
type Keyring struct {
	primary SealingKey
	keys    map[string]SealingKey // every key, the primary included, by ID
	older   []SealingKey          // in the order given
}

// NewKeyring returns the keyring whose primary key is primary and which
// still opens what the older keys sealed. It panics, naming NewKeyring,
// when a key has an empty ID or one over 64 bytes, when two keys share
// an ID, or when a secret is not [SealingKeySize] bytes. It copies the
// secrets.
func NewKeyring(primary SealingKey, older ...SealingKey) *Keyring {
	kr := &Keyring{keys: make(map[string]SealingKey, 1+len(older))}
	for i, k := range append([]SealingKey{primary}, older...) {
		switch {
		case k.ID == "" || len(k.ID) > maxSealingKeyID:
			panic(fmt.Sprintf("idempotency: NewKeyring: key %d: the ID must be 1 to %d bytes, got %d", i, maxSealingKeyID, len(k.ID)))
		case len(k.Secret) != SealingKeySize:
			panic(fmt.Sprintf("idempotency: NewKeyring: key %q: the secret must be %d bytes, got %d", k.ID, SealingKeySize, len(k.Secret)))
		}
		if _, dup := kr.keys[k.ID]; dup {
			panic(fmt.Sprintf("idempotency: NewKeyring: two keys have the ID %q", k.ID))
		}
		k.Secret = append([]byte(nil), k.Secret...)
		kr.keys[k.ID] = k
		if i == 0 {
			kr.primary = k
		} else {
			kr.older = append(kr.older, k)
		}
	}
	return kr
}

// Primary returns the ID of the key that seals new records.
func (kr *Keyring) Primary() string { return kr.primary.ID }

// Sealing configures [WithSealing].
type Sealing struct {
	// Keys seals and opens the records of every scope, under a key
	// derived for each scope (HKDF-SHA256 of the secret and the scope).
	// Required unless TenantKeys is set.
	Keys *Keyring
	// TenantKeys, when set, returns the keyring of a scope (the value of
	// the scope function, [WithScope]) in place of Keys: keys a team
	// keeps per tenant, so that forgetting a tenant's keys makes every
	// record sealed for it unreadable (crypto-shredding). Its error fails
	// the call as a scope function's does: a gRPC status as it is
	// (UNAVAILABLE invites a retry), INTERNAL otherwise. Return the same
	// *Keyring for a scope from call to call: the keys derived from it
	// are cached per *Keyring.
	TenantKeys func(ctx context.Context, scope string) (*Keyring, error)
	// RequireSealed refuses records that are not sealed, as corrupt
	// (INTERNAL, IDEMPOTENCY_RECORD_CORRUPT), and fingerprints that are
	// not keyed, as another request's: set it once every record written
	// before sealing was turned on has expired (the retention after the
	// last server without sealing stopped). Until then, those records
	// replay as they did.
	RequireSealed bool
}

// SealedRecords returns, for each key ID, how many records s has sealed
// with that key since s was built ([WithSealing]): one per nonce drawn,
// that is per outcome it sealed to store, and per [NewTxOutcome] (whose
// transaction may roll back, and whose call then seals its outcome again
// when it returns); a replay, a record opened, a fingerprint keyed and a
// Complete retried after a store error seal nothing more. It is nil
// for a server without sealing, and has no entry for a key that sealed
// nothing here.
//
// AES-GCM with random 96-bit nonces stays within its bounds for 2^32
// records under one key (NIST SP 800-38D). The key of each scope is
// derived from the key's secret, so a key ID's count is at least the
// count of each scope's key: compare the sum over every process that
// seals with the key (one count per process, from its start) with 2^32,
// and rotate the primary well before it. With [Sealing.TenantKeys], the
// keys of two tenants that share an ID are counted together, which only
// raises the figure. otelidempotency.RegisterSealingMetrics reports it
// as a counter; SECURITY.md says how to watch it.
func (s *Server) SealedRecords() map[string]uint64 {
	if s.e.seal == nil {
		return nil
	}
	out := make(map[string]uint64)
	s.e.seal.sealed.Range(func(id, n any) bool {
		out[id.(string)] = n.(*atomic.Uint64).Load()
		return true
	})
	return out
}

// SealedBy returns the ID of the key that sealed data, a stored record
// ([WithSealing]), without opening it; ok is false when data is not a
// sealed record. It reads untrusted bytes and never panics.
func SealedBy(data []byte) (keyID string, ok bool) {
	id, ok := seal.KeyID(data)
	return string(id), ok
}
