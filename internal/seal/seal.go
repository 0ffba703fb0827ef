// Package seal is the cryptography of sealed records
// (idempotency.WithSealing): the key of a scope derived from a sealing
// key's secret ([Derive]), the sealed record that key writes and opens
// ([Key.Seal], [Key.Open]), and the fingerprint it keys
// ([Key.Fingerprint]). It knows nothing of keyrings, servers or errors
// shown to users: package idempotency picks the key, counts what it seals
// and says why a record is refused.
//
// A sealed record is
//
//	0x00 'S' 0x01 | len(id) | id | nonce (12 bytes) | AES-256-GCM ciphertext and tag
//
// whose plaintext is the record's encoding and whose associated data is
// everything before the nonce followed by the store key. A record's
// encoding never starts with 0x00 (no protobuf field has number 0), so the
// first byte tells a sealed record from one written without sealing
// ([IsSealed]). The AEAD key is derived from the key named by id and the
// call's scope: a record edited, cut, moved to another store key or opened
// for another scope fails authentication.
//
// The format is stored: records sealed by one build open in the next
// (testdata/v1.json holds one, TestGolden opens it).
package seal

import (
	"crypto/rand"
	"sync"
)

// The sealed record's header and sizes.
const (
	magic   = 0x00
	format  = 'S'
	version = 1
	header  = 4 // magic, format, version, id length
	nonceN  = 12
	tagN    = 16
)

// MaxKeyID is the length of the longest key ID, in bytes: the bound
// idempotency.NewKeyring holds a key's ID to, which [MaxFingerprint]
// counts on.
const MaxKeyID = 64

// aads holds scratch buffers for the associated data: the AEAD's
// arguments escape, so a buffer of the stack would be one allocation per
// record.
var aads = sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }}

// maxPooledAAD is the largest associated data buffer kept for reuse.
const maxPooledAAD = 4 << 10

func putAAD(b *[]byte) {
	if cap(*b) <= maxPooledAAD {
		aads.Put(b)
	}
}

// Seal appends to dst the sealed record of rec, the encoded record stored
// under storeKey, under k, the key the key named id derived for the
// record's scope. It draws a fresh random nonce each time. rec must not
// overlap dst's spare capacity (the header is written there first): seal
// from one buffer into another, as the server's pooled buffers are.
func (k *Key) Seal(dst []byte, id, storeKey string, rec []byte) []byte {
	start := len(dst)
	dst = append(dst, magic, format, version, byte(len(id)))
	dst = append(dst, id...)
	headerEnd := len(dst)
	dst = append(dst, make([]byte, nonceN)...)
	nonce := dst[headerEnd:]
	rand.Read(nonce) // never fails
	aad := aads.Get().(*[]byte)
	defer putAAD(aad)
	*aad = append(append((*aad)[:0], dst[start:headerEnd]...), storeKey...)
	return k.aead.Seal(dst, nonce, rec, *aad)
}

// Open appends to dst the encoded record that data, a sealed record
// stored under storeKey, seals under k, and returns it, with true; false
// when data is not a sealed record of a known format or does not open under k
// for storeKey: edited, cut, moved, sealed for another scope or by
// another key. It reads untrusted bytes and never panics, provided dst's
// spare capacity does not overlap data (crypto/cipher panics on an
// inexact overlap): open from one buffer into another.
func (k *Key) Open(dst, data []byte, storeKey string) ([]byte, bool) {
	id, nonce, ct, ok := parse(data)
	if !ok {
		return nil, false
	}
	aad := aads.Get().(*[]byte)
	defer putAAD(aad)
	*aad = append(append((*aad)[:0], data[:header+len(id)]...), storeKey...)
	plain, err := k.aead.Open(dst, nonce, ct, *aad)
	return plain, err == nil
}

// IsSealed reports whether data starts as a sealed record does: a record
// written without sealing never does.
func IsSealed(data []byte) bool {
	return len(data) > 0 && data[0] == magic
}

// KeyID returns the ID of the key that sealed data, without opening it;
// ok is false when data is too short or not of a known format. The ID is
// a slice of data. It reads untrusted bytes and never panics.
func KeyID(data []byte) (id []byte, ok bool) {
	id, _, _, ok = parse(data)
	return id, ok
}

// parse splits a sealed record into its key ID, nonce and ciphertext; ok
// is false when data is too short or not of a known format.
func parse(data []byte) (id, nonce, ct []byte, ok bool) {
	if len(data) < header || data[0] != magic || data[1] != format || data[2] != version {
		return nil, nil, nil, false
	}
	n := int(data[3])
	if n == 0 || len(data) < header+n+nonceN+tagN {
		return nil, nil, nil, false
	}
	id = data[header : header+n]
	nonce = data[header+n : header+n+nonceN]
	return id, nonce, data[header+n+nonceN:], true
}
