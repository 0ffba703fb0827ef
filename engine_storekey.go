package idempotency

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// keyKind says what names the operation a store key belongs to.
type keyKind uint8

const (
	// kindMethod: the full gRPC method name, "/pkg.Service/Method".
	kindMethod keyKind = iota
	// kindNamespace: a namespace ([MethodPolicy.Namespace]), or the
	// operation of [Do] and [Once].
	kindNamespace
)

// storeKey namespaces the client key by operation and scope and hashes
// it, so no client key shapes the store's key space and no caller can
// reach another scope's records.
//
// The hashed bytes are each of name, scope and key preceded by its length
// (a uvarint), so no two different triples hash the same bytes. A
// namespace's bytes are preceded by a zero byte besides: a method's bytes
// begin with its name's length, never zero (gRPC's method names are never
// empty), so a namespace never shares a key with a method, whatever the
// names. A method's key is what it was before namespaces existed.
func storeKey(kind keyKind, name, scope, key string) string {
	var buf [512]byte
	b := buf[:0]
	if kind == kindNamespace {
		b = append(b, 0)
	}
	for _, s := range [...]string{name, scope, key} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	sum := sha256.Sum256(b)
	var enc [(sha256.Size*8 + 5) / 6]byte // unpadded base64 of the sum
	base64.RawURLEncoding.Encode(enc[:], sum[:])
	return string(enc[:]) // the one allocation
}
