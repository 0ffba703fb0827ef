package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strconv"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Wire names.
const (
	// MetadataKey is the request metadata key that carries the client's
	// idempotency key.
	MetadataKey = "idempotency-key"
	// ReplayedKey is set to "true" on a replayed answer: in the response
	// header of a replayed success, in the trailer of a replayed error.
	// Only a replay sets it: the server interceptor strips it, under any
	// letter case, from the header and trailer of every handler it calls.
	// Clients read it with [Replayed] or [ReplayedInto].
	ReplayedKey = "idempotency-replayed"
	// ResumeAfterKey is the request metadata key with which a retry of a
	// keyed server-streaming call asks for the messages after the first N
	// of its answer (a non-negative decimal integer), those the caller
	// already has. See [Server.StreamServerInterceptor].
	ResumeAfterKey = "idempotency-resume-after"
	// MaxKeyLen is the longest key accepted, in bytes.
	MaxKeyLen = 255
)

// ValidateKey reports whether key is acceptable: 1 to [MaxKeyLen] bytes of
// printable ASCII (0x21 to 0x7E). The error is a [*KeyError] and never
// echoes the key.
func ValidateKey(key string) error {
	if key == "" {
		return &KeyError{Err: ErrKeyInvalid, Detail: "key is empty"}
	}
	if len(key) > MaxKeyLen {
		return &KeyError{Err: ErrKeyInvalid, Detail: "key is longer than " + strconv.Itoa(MaxKeyLen) + " bytes"}
	}
	for i := range len(key) {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return &KeyError{Err: ErrKeyInvalid, Detail: "key has a byte outside printable ASCII at offset " + strconv.Itoa(i)}
		}
	}
	return nil
}

// clientKey returns the key of the call: from metadata, else from the
// method's key field. It returns "" with no error when there is none, and
// the method's configuration error, failing the call closed, when its
// policy cannot work.
func (e *engine) clientKey(ctx context.Context, m *methodConfig, req proto.Message) (string, error) {
	if m.err != nil {
		return "", m.err
	}
	vals := metadata.ValueFromIncomingContext(ctx, e.cfg.metadataKey)
	switch {
	case len(vals) > 1:
		return "", &KeyError{Err: ErrKeyInvalid, Detail: "more than one key in metadata " + strconv.Quote(e.cfg.metadataKey)}
	case len(vals) == 1:
		return vals[0], ValidateKey(vals[0])
	case m.keyField != nil && req != nil: // nil: a client stream without messages
		k := req.ProtoReflect().Get(m.keyField).String()
		if k == "" {
			return "", nil
		}
		return k, ValidateKey(k)
	}
	return "", nil
}

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
