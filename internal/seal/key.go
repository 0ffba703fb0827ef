package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// info is the HKDF info of a scope's key, before the scope. Changing it
// changes every derived key: no record sealed before would open.
const info = "idempotency sealed record v1\x00"

// Key is a sealing key's key for one scope: an AEAD that seals the scope's
// records and a MAC key that keys its fingerprints. It is safe for
// concurrent use.
type Key struct {
	aead cipher.AEAD
	macs sync.Pool // of hash.Hash, HMAC-SHA256 under the MAC key
}

// Derive returns the key of scope derived from secret, a sealing key's
// secret: 64 bytes of HKDF-SHA256 of the secret, with the scope in its
// info, split into an AES-256-GCM key and an HMAC-SHA256 key. It costs
// microseconds; [Cache] keeps the keys a server derives.
func Derive(secret []byte, scope string) *Key {
	okm, err := hkdf.Key(sha256.New, secret, nil, info+scope, 64)
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
	k := &Key{aead: aead}
	k.macs.New = func() any { return hmac.New(sha256.New, macKey) }
	return k
}

// fingerprintVersion is the first byte of a keyed fingerprint:
// 0x02 | len(id) | id | HMAC-SHA256 under the MAC key of the key named id,
// derived for the call's scope, of a kind byte and the data.
const fingerprintVersion = 2

// What a keyed fingerprint's HMAC is of, told by its first byte, so that
// no input of one kind keys to the fingerprint of another.
const (
	// OfInput: what the default fingerprint hashes (its input), so a
	// request's bytes are hashed once, not hashed and the hash keyed.
	OfInput byte = 0
	// OfFingerprint: an unkeyed fingerprint (a custom fingerprint
	// function's, or a client stream's of other than one message).
	OfFingerprint byte = 1
)

// kinds holds the first byte of each kind of HMAC input, to write
// without allocating.
var kinds = [2]byte{OfInput, OfFingerprint}

// MaxFingerprint is the length of the longest keyed fingerprint.
const MaxFingerprint = 2 + MaxKeyID + sha256.Size

// Fingerprint appends to dst the fingerprint keyed by k, the key the key
// named id derived for the call's scope, of data, whose kind is
// [OfInput] or [OfFingerprint]. Compare two with hmac.Equal.
func (k *Key) Fingerprint(dst []byte, id string, kind byte, data []byte) []byte {
	h := k.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(kinds[kind : kind+1])
	h.Write(data)
	dst = append(dst, fingerprintVersion, byte(len(id)))
	dst = h.Sum(append(dst, id...))
	k.macs.Put(h)
	return dst
}

// FingerprintKeyID returns the ID of the key that keyed fp, and false
// when fp is not a keyed fingerprint. It reads untrusted bytes and never
// panics.
func FingerprintKeyID(fp []byte) ([]byte, bool) {
	if len(fp) < 2 || fp[0] != fingerprintVersion || len(fp) != 2+int(fp[1])+sha256.Size || fp[1] == 0 {
		return nil, false
	}
	return fp[2 : 2+int(fp[1])], true
}
