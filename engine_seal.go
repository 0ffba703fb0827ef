package idempotency

import (
	"bytes"
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/grpc-idempotency/idempotency/internal/seal"
)

// inlineInput is the longest fingerprint input a call keeps in its
// callSeal; a longer one is kept in an allocation of its own. The call
// keeps its input to compute its unkeyed fingerprint only when asked and to
// key it under an older key: a copy, read after the claim, which the
// caller's request, read again then, would not be (another call sharing
// it may have changed it).
const inlineInput = 64

// Why a record does not open. Each is wrapped in [ErrRecordCorrupt].
var (
	errUnsealed   = errors.New("the record is not sealed, and unsealed records are refused (Sealing.RequireSealed)")
	errSealingOff = errors.New("the record is sealed, and the server has no sealing keys (WithSealing)")
	errSealFormat = errors.New("the sealed record is cut short or of an unknown format")
	errSealOpen   = errors.New("the sealed record does not open under its key for this store key and scope: edited, moved, or another scope's")
	errNotSealed  = errors.New("the record is not sealed, and its entry's fingerprint is keyed: only a sealing server writes such an entry")
	errSealedOld  = errors.New("the record is sealed, and its entry's fingerprint is not keyed: only a server without sealing writes such an entry")
)

// sealer is the glue between a server built [WithSealing] and package
// seal, which does the cryptography: it picks the keyring of a call's
// scope and the key of a record, keys the call's fingerprint, counts the
// records sealed and says why one does not open.
type sealer struct {
	keys          *Keyring
	tenant        func(context.Context, string) (*Keyring, error)
	requireSealed bool

	derived seal.Cache[*Keyring]

	sealed sync.Map // key ID → *atomic.Uint64: the records sealed with it ([Server.SealedRecords])
}

// countSealed counts one record sealed with the key named id.
func (s *sealer) countSealed(id string) {
	n, ok := s.sealed.Load(id)
	if !ok {
		n, _ = s.sealed.LoadOrStore(id, new(atomic.Uint64))
	}
	n.(*atomic.Uint64).Add(1)
}

// callSeal is a sealed call's own state, allocated only when the server
// seals, so that calls of other servers carry none of it.
type callSeal struct {
	scope    string
	keyring  *Keyring
	key      *seal.Key // the keyring's primary key's, for scope
	input    []byte    // the input, when the call keys it ([seal.OfInput])
	rawFP    []byte    // the request's unkeyed fingerprint; with input, nil until asked for ([callSeal.unkeyed])
	keyedFP  []byte    // the request's fingerprint keyed by the primary key, which the call claims with
	legacyFP bool      // the call took the unkeyed fingerprint of an entry written before sealing
	rawArray [fingerprintSize]byte
	keyArray [seal.MaxFingerprint]byte
	inArray  [inlineInput]byte
}

// prepare fills in cs (a new one when nil) for a call in scope, whose
// keyring is kr, and returns it. The call's request is the one whose
// [fingerprintInput] is input; or, when input is nil, the one whose
// unkeyed fingerprint is fp.
func (s *sealer) prepare(cs *callSeal, kr *Keyring, scope string, fp, input []byte) *callSeal {
	if cs == nil {
		cs = new(callSeal)
	}
	cs.scope, cs.keyring, cs.legacyFP = scope, kr, false
	cs.input, cs.rawFP = nil, nil
	cs.key = s.derive(kr, kr.primary, scope)
	switch {
	case input == nil:
		cs.rawFP = append(cs.rawArray[:0], fp...)
		cs.keyedFP = cs.key.Fingerprint(cs.keyArray[:0], kr.primary.ID, seal.OfFingerprint, cs.rawFP)
		return cs
	case len(input) <= inlineInput:
		cs.input = append(cs.inArray[:0], input...)
	default:
		cs.input = make([]byte, len(input))
		copy(cs.input, input)
	}
	cs.keyedFP = cs.key.Fingerprint(cs.keyArray[:0], kr.primary.ID, seal.OfInput, input)
	return cs
}

// unkeyed returns the request's unkeyed fingerprint: [Fingerprint]'s, or
// the custom fingerprint function's.
func (cs *callSeal) unkeyed() []byte {
	if cs.rawFP == nil {
		cs.rawFP = appendFingerprintOfInput(cs.rawArray[:0], cs.input)
	}
	return cs.rawFP
}

// keyedBy appends to dst the call's request's fingerprint keyed by d,
// the derived key of the key named id: one of the keyring's older keys.
func (cs *callSeal) keyedBy(dst []byte, d *seal.Key, id string) []byte {
	if cs.input == nil {
		return d.Fingerprint(dst, id, seal.OfFingerprint, cs.rawFP)
	}
	return d.Fingerprint(dst, id, seal.OfInput, cs.input)
}

func newSealer(s Sealing) *sealer {
	return &sealer{keys: s.Keys, tenant: s.TenantKeys, requireSealed: s.RequireSealed}
}

// keyring returns the keyring of scope.
func (s *sealer) keyring(ctx context.Context, scope string) (*Keyring, error) {
	if s.tenant == nil {
		return s.keys, nil
	}
	kr, err := s.tenant(ctx, scope)
	switch {
	case err != nil:
	case kr == nil:
		err = fmt.Errorf("Sealing.TenantKeys returned no keyring for scope %q", scope)
	case kr.primary.ID == "":
		err = fmt.Errorf("Sealing.TenantKeys returned a Keyring not made by NewKeyring for scope %q", scope)
	}
	return kr, err
}

// derive returns the key of scope derived from k, a key of kr
// ([seal.Derive]), cached.
func (s *sealer) derive(kr *Keyring, k SealingKey, scope string) *seal.Key {
	return s.derived.Key(kr, k.ID, k.Secret, scope)
}

// open returns the encoded record that data, a stored record of the call
// under storeKey in scope, seals, appended to dst, and the ID of the key
// that sealed it. A record written without sealing is returned as it is
// (ID ""), unless the server requires sealed records. Its errors say why
// the record does not open; the caller wraps them in [ErrRecordCorrupt].
// primary, when not nil, is the derived key of kr's primary for scope.
func (s *sealer) open(dst []byte, kr *Keyring, scope, storeKey string, data []byte, primary *seal.Key) ([]byte, string, error) {
	if !seal.IsSealed(data) {
		if s.requireSealed {
			return nil, "", errUnsealed
		}
		return append(dst, data...), "", nil
	}
	id, ok := seal.KeyID(data)
	if !ok {
		return nil, "", errSealFormat
	}
	k, ok := kr.keys[string(id)]
	if !ok {
		return nil, string(id), fmt.Errorf("the record is sealed by key %q, which the keyring does not hold", id)
	}
	d := primary
	if d == nil || k.ID != kr.primary.ID {
		d = s.derive(kr, k, scope)
	}
	plain, ok := d.Open(dst, data, storeKey)
	if !ok {
		return nil, k.ID, errSealOpen
	}
	return plain, k.ID, nil
}

// sameRequest returns nil when fp, the fingerprint of a stored entry of
// c's key whose record is data (nil while in flight), is that of c's
// request: c's own, or, with sealing, the one an older key of c's
// keyring keyed, or the unkeyed one of an entry written before sealing
// was turned on (unless [Sealing.RequireSealed]); c then takes fp as its
// fingerprint, which the entry's record holds, and notes which kind it
// matched: an entry of a keyed fingerprint must hold a sealed record, one
// of an unkeyed fingerprint an unsealed one ([engine.replay]). A keyed
// fingerprint is only ever compared keyed, so no request's unkeyed
// fingerprint (a custom [FingerprintFunc]'s, which a caller may shape)
// matches another's keyed one. Otherwise it returns [ErrKeyReused], or
// [ErrRecordCorrupt] when fp is keyed by a key c's keyring no longer
// holds (whether it is c's request cannot be told, and its record could
// not be opened), or when a server without sealing meets a sealed record.
func (e *engine) sameRequest(c *call, fp, data []byte) error {
	cs := c.sealed
	if cs == nil {
		if bytes.Equal(fp, c.fingerprint) {
			return nil
		}
		if _, keyed := seal.FingerprintKeyID(fp); keyed && seal.IsSealed(data) {
			return fmt.Errorf("%w: %w", ErrRecordCorrupt, errSealingOff)
		}
		return ErrKeyReused
	}
	if id, keyed := seal.FingerprintKeyID(fp); keyed {
		if k, held := cs.keyring.keys[string(id)]; held {
			if k.ID != cs.keyring.primary.ID {
				var buf [seal.MaxFingerprint]byte
				if !hmac.Equal(fp, cs.keyedBy(buf[:0], e.seal.derive(cs.keyring, k, cs.scope), k.ID)) {
					return ErrKeyReused
				}
				c.fingerprint = append([]byte(nil), fp...)
			} else if !hmac.Equal(fp, cs.keyedFP) {
				return ErrKeyReused
			}
			return nil
		}
		if !e.seal.requireSealed && bytes.Equal(fp, cs.unkeyed()) {
			// A custom fingerprint of the keyed shape, of a key no keyring
			// has: an entry written before sealing.
			c.fingerprint, cs.legacyFP = cs.rawFP, true
			return nil
		}
		return fmt.Errorf("%w: the entry's fingerprint is keyed by key %q, which the keyring does not hold", ErrRecordCorrupt, id)
	}
	if !e.seal.requireSealed && bytes.Equal(fp, cs.unkeyed()) {
		c.fingerprint, cs.legacyFP = cs.rawFP, true
		return nil
	}
	return ErrKeyReused
}

// requestFingerprint is the fingerprint of c's request that does not
// depend on a key: the unkeyed one, with sealing as without. It writes
// nothing to c (a call nested in c's work asks from its own goroutine):
// an unkeyed fingerprint not yet computed is computed into scratch.
func (c *call) requestFingerprint(scratch *[fingerprintSize]byte) []byte {
	switch cs := c.sealed; {
	case cs == nil:
		return c.fingerprint
	case cs.rawFP == nil:
		return appendFingerprintOfInput(scratch[:0], cs.input)
	default:
		return cs.rawFP
	}
}
