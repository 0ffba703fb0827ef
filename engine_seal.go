package idempotency

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"sync"
	"sync/atomic"
)

// A sealed record ([WithSealing]) is
//
//	0x00 'S' 0x01 | len(id) | id | nonce (12 bytes) | AES-256-GCM ciphertext and tag
//
// whose plaintext is the record's encoding and whose associated data is
// everything before the nonce followed by the store key. A record's
// encoding never starts with 0x00 (no protobuf field has number 0), so the
// first byte tells a sealed record from one written without sealing. The
// AEAD key is derived from the key named by id and the call's scope
// ([sealer.derive]): a record edited, cut, moved to another store key or
// opened for another scope fails authentication.
const (
	sealMagic   = 0x00
	sealFormat  = 'S'
	sealVersion = 1
	sealHeader  = 4 // magic, format, version, id length
	sealNonce   = 12
	sealTag     = 16
)

// keyedFingerprintVersion is the first byte of a fingerprint keyed by a
// sealing key: 0x02 | len(id) | id | HMAC-SHA256 under the key named by
// id, derived for the call's scope, of the request ([macOfInput]).
const keyedFingerprintVersion = 2

// What a keyed fingerprint's HMAC is of, told by its first byte: with the
// default fingerprint function and one request, what [Fingerprint] hashes
// ([fingerprintInput]), so the request's bytes are hashed once, not
// hashed and the hash keyed; else the unkeyed fingerprint (a custom
// fingerprint function's, or a client stream's of other than one message).
const (
	macOfInput       = 0
	macOfFingerprint = 1
)

// macKinds holds the first byte of each kind of HMAC input, to write
// without allocating.
var macKinds = [2]byte{macOfInput, macOfFingerprint}

// inlineInput is the longest fingerprint input a call keeps in its
// callSeal; a longer one is kept in an allocation of its own. The call
// keeps its input to compute its unkeyed fingerprint only when asked and to
// key it under an older key: a copy, read after the claim, which the
// caller's request, read again then, would not be (another call sharing
// it may have changed it).
const inlineInput = 64

// maxKeyedFingerprint is the length of the longest keyed fingerprint.
const maxKeyedFingerprint = 2 + maxSealingKeyID + sha256.Size

// maxDerived bounds the cache of derived keys; past it the cache starts
// again (a derivation is an HKDF, microseconds).
const maxDerived = 4096

// Why a record does not open. Each is wrapped in [ErrRecordCorrupt].
var (
	errUnsealed   = errors.New("the record is not sealed, and unsealed records are refused (Sealing.RequireSealed)")
	errSealingOff = errors.New("the record is sealed, and the server has no sealing keys (WithSealing)")
	errSealFormat = errors.New("the sealed record is cut short or of an unknown format")
	errSealOpen   = errors.New("the sealed record does not open under its key for this store key and scope: edited, moved, or another scope's")
	errNotSealed  = errors.New("the record is not sealed, and its entry's fingerprint is keyed: only a sealing server writes such an entry")
	errSealedOld  = errors.New("the record is sealed, and its entry's fingerprint is not keyed: only a server without sealing writes such an entry")
)

// sealer seals and opens the records of a server built [WithSealing], and
// keys its fingerprints.
type sealer struct {
	keys          *Keyring
	tenant        func(context.Context, string) (*Keyring, error)
	requireSealed bool

	derived sync.Map // derivedID → *derivedEntry
	n       atomic.Int64
	last    atomic.Pointer[derivedEntry] // the key derive returned last, looked at first

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

// derivedEntry is a derived key with what it was derived from.
type derivedEntry struct {
	derivedID
	d *derivedKey
}

type derivedID struct {
	kr        *Keyring
	id, scope string
}

// callSeal is a sealed call's own state, allocated only when the server
// seals, so that calls of other servers carry none of it.
type callSeal struct {
	scope    string
	keyring  *Keyring
	key      *derivedKey // the keyring's primary key's, for scope
	input    []byte      // the input, when the call keys it ([macOfInput])
	rawFP    []byte      // the request's unkeyed fingerprint; with input, nil until asked for ([callSeal.unkeyed])
	keyedFP  []byte      // the request's fingerprint keyed by the primary key, which the call claims with
	legacyFP bool        // the call took the unkeyed fingerprint of an entry written before sealing
	rawArray [fingerprintSize]byte
	keyArray [maxKeyedFingerprint]byte
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
		cs.keyedFP = cs.key.keyFingerprint(cs.keyArray[:0], kr.primary.ID, macOfFingerprint, cs.rawFP)
		return cs
	case len(input) <= inlineInput:
		cs.input = append(cs.inArray[:0], input...)
	default:
		cs.input = make([]byte, len(input))
		copy(cs.input, input)
	}
	cs.keyedFP = cs.key.keyFingerprint(cs.keyArray[:0], kr.primary.ID, macOfInput, input)
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
func (cs *callSeal) keyedBy(dst []byte, d *derivedKey, id string) []byte {
	if cs.input == nil {
		return d.keyFingerprint(dst, id, macOfFingerprint, cs.rawFP)
	}
	return d.keyFingerprint(dst, id, macOfInput, cs.input)
}

// derivedKey is a sealing key's key for one scope: an AEAD that seals the
// scope's records and a MAC key that keys its fingerprints.
type derivedKey struct {
	aead cipher.AEAD
	macs sync.Pool // of hash.Hash, HMAC-SHA256 under the MAC key
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

// derive returns k's key for scope: 64 bytes of HKDF-SHA256 of k's secret,
// with the scope in its info, split into an AES-256-GCM key and a MAC key.
func (s *sealer) derive(kr *Keyring, k SealingKey, scope string) *derivedKey {
	if l := s.last.Load(); l != nil && l.kr == kr && l.id == k.ID && l.scope == scope {
		return l.d
	}
	id := derivedID{kr: kr, id: k.ID, scope: scope}
	if e, ok := s.derived.Load(id); ok {
		s.last.Store(e.(*derivedEntry))
		return e.(*derivedEntry).d
	}
	okm, err := hkdf.Key(sha256.New, k.Secret, nil, "idempotency sealed record v1\x00"+scope, 64)
	if err != nil {
		panic(err) // 64 bytes of SHA-256 is far below HKDF's bound
	}
	block, err := aes.NewCipher(okm[:32])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	macKey := okm[32:]
	d := &derivedKey{aead: aead}
	d.macs.New = func() any { return hmac.New(sha256.New, macKey) }
	if s.n.Add(1) > maxDerived {
		s.derived.Clear()
		s.n.Store(1)
	}
	actual, _ := s.derived.LoadOrStore(id, &derivedEntry{id, d})
	s.last.Store(actual.(*derivedEntry))
	return actual.(*derivedEntry).d
}

// keyFingerprint appends to dst the fingerprint keyed by d, the derived
// key of the key named id ([keyedFingerprintVersion]), of data, which kind
// says what it is ([macOfInput], [macOfFingerprint]).
func (d *derivedKey) keyFingerprint(dst []byte, id string, kind byte, data []byte) []byte {
	h := d.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(macKinds[kind : kind+1])
	h.Write(data)
	dst = append(dst, keyedFingerprintVersion, byte(len(id)))
	dst = h.Sum(append(dst, id...))
	d.macs.Put(h)
	return dst
}

// fingerprintKey returns the ID of the key that keyed fp, and false when
// fp is not a keyed fingerprint.
func fingerprintKey(fp []byte) ([]byte, bool) {
	if len(fp) < 2 || fp[0] != keyedFingerprintVersion || len(fp) != 2+int(fp[1])+sha256.Size || fp[1] == 0 {
		return nil, false
	}
	return fp[2 : 2+int(fp[1])], true
}

// seal appends to dst the sealed form of rec, the encoded record of the
// call under storeKey, under d, the derived key of the key named id for
// the call's scope.
func seal(dst []byte, d *derivedKey, id, storeKey string, rec []byte) []byte {
	start := len(dst)
	dst = append(dst, sealMagic, sealFormat, sealVersion, byte(len(id)))
	dst = append(dst, id...)
	headerEnd := len(dst)
	dst = append(dst, make([]byte, sealNonce)...)
	nonce := dst[headerEnd:]
	rand.Read(nonce)   // never fails
	aad := getBuffer() // scratch: the AEAD's arguments escape
	defer putBuffer(aad)
	*aad = append(append((*aad)[:0], dst[start:headerEnd]...), storeKey...)
	return d.aead.Seal(dst, nonce, rec, *aad)
}

// open returns the encoded record that data, a stored record of the call
// under storeKey in scope, seals, appended to dst, and the ID of the key
// that sealed it. A record written without sealing is returned as it is
// (ID ""), unless the server requires sealed records. Its errors say why
// the record does not open; the caller wraps them in [ErrRecordCorrupt].
// primary, when not nil, is the derived key of kr's primary for scope.
func (s *sealer) open(dst []byte, kr *Keyring, scope, storeKey string, data []byte, primary *derivedKey) ([]byte, string, error) {
	if !isSealed(data) {
		if s.requireSealed {
			return nil, "", errUnsealed
		}
		return append(dst, data...), "", nil
	}
	id, nonce, ct, ok := parseSealed(data)
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
	aad := getBuffer() // scratch: the AEAD's arguments escape
	defer putBuffer(aad)
	*aad = append(append((*aad)[:0], data[:sealHeader+len(id)]...), storeKey...)
	plain, err := d.aead.Open(dst, nonce, ct, *aad)
	if err != nil {
		return nil, k.ID, errSealOpen
	}
	return plain, k.ID, nil
}

// isSealed reports whether data starts as a sealed record does.
func isSealed(data []byte) bool {
	return len(data) > 0 && data[0] == sealMagic
}

// parseSealed splits a sealed record into its key ID, nonce and
// ciphertext; ok is false when data is too short or not of a known format.
func parseSealed(data []byte) (id, nonce, ct []byte, ok bool) {
	if len(data) < sealHeader || data[0] != sealMagic || data[1] != sealFormat || data[2] != sealVersion {
		return nil, nil, nil, false
	}
	n := int(data[3])
	if n == 0 || len(data) < sealHeader+n+sealNonce+sealTag {
		return nil, nil, nil, false
	}
	id = data[sealHeader : sealHeader+n]
	nonce = data[sealHeader+n : sealHeader+n+sealNonce]
	return id, nonce, data[sealHeader+n+sealNonce:], true
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
		if _, keyed := fingerprintKey(fp); keyed && isSealed(data) {
			return fmt.Errorf("%w: %w", ErrRecordCorrupt, errSealingOff)
		}
		return ErrKeyReused
	}
	if id, keyed := fingerprintKey(fp); keyed {
		if k, held := cs.keyring.keys[string(id)]; held {
			if k.ID != cs.keyring.primary.ID {
				var buf [maxKeyedFingerprint]byte
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
