package idempotency

import (
	"crypto/sha256"
	"encoding/binary"

	"google.golang.org/protobuf/proto"
)

// FingerprintFunc returns the fingerprint of a request to fullMethod. Two
// requests with the same key must have equal fingerprints to share an
// outcome. fullMethod is the full method name, or the method's namespace
// when it has one ([MethodPolicy.Namespace]), or the operation of [Do] and
// [Once], whose req is an empty message when they are given none.
type FingerprintFunc func(fullMethod string, req proto.Message) ([]byte, error)

// fingerprintVersion is the first byte of every fingerprint [Fingerprint]
// returns, so the algorithm can change without matching old records.
const fingerprintVersion = 1

var deterministic = proto.MarshalOptions{Deterministic: true}

// Fingerprint is the default [FingerprintFunc]: a version byte followed by
// SHA-256 over the full method name (or namespace) and the request's
// deterministic proto encoding. To leave volatile fields out, clear them on a clone and call
// Fingerprint on it from your own FingerprintFunc.
func Fingerprint(fullMethod string, req proto.Message) ([]byte, error) {
	buf := getBuffer()
	defer putBuffer(buf)
	b := binary.AppendUvarint((*buf)[:0], uint64(len(fullMethod)))
	b = append(b, fullMethod...)
	b, err := deterministic.MarshalAppend(b, req)
	*buf = b
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	fp := make([]byte, 1+sha256.Size)
	fp[0] = fingerprintVersion
	copy(fp[1:], sum[:])
	return fp, nil
}
