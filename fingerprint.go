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
// [Once], whose req is an empty message when they are given none. A
// client-streaming call of other than one message is fingerprinted as the
// sequence of the fingerprints of its messages.
type FingerprintFunc func(fullMethod string, req proto.Message) ([]byte, error)

// fingerprintVersion is the first byte of every fingerprint [Fingerprint]
// returns, so the algorithm can change without matching old records.
const fingerprintVersion = 1

var deterministic = proto.MarshalOptions{Deterministic: true}

// fingerprintSize is the length of a fingerprint [Fingerprint] returns.
const fingerprintSize = 1 + sha256.Size

// fingerprintOf appends to dst the fingerprint of a call's requests under
// id: f's of the one request of a unary or server-streaming call (nil f:
// [Fingerprint]'s, computed into dst), and for a client stream of any other
// length, a version byte and SHA-256 over the number of messages and f's
// fingerprint of each, in order, so that the same messages in another
// order, or one more or one fewer, make another fingerprint.
func fingerprintOf(f FingerprintFunc, dst []byte, id string, reqs []proto.Message) ([]byte, error) {
	if len(reqs) == 1 {
		if f == nil {
			return appendFingerprint(dst, id, reqs[0])
		}
		return f(id, reqs[0])
	}
	h := sha256.New()
	var scratch [fingerprintSize]byte
	var n [binary.MaxVarintLen64]byte
	h.Write(binary.AppendUvarint(n[:0], uint64(len(reqs))))
	for _, r := range reqs {
		var fp []byte
		var err error
		if f == nil {
			fp, err = appendFingerprint(scratch[:0], id, r)
		} else {
			fp, err = f(id, r)
		}
		if err != nil {
			return nil, err
		}
		h.Write(binary.AppendUvarint(n[:0], uint64(len(fp))))
		h.Write(fp)
	}
	return h.Sum(append(dst, fingerprintVersion)), nil
}

// Fingerprint is the default [FingerprintFunc]: a version byte followed by
// SHA-256 over the full method name (or namespace) and the request's
// deterministic proto encoding. To leave volatile fields out, clear them on a clone and call
// Fingerprint on it from your own FingerprintFunc.
func Fingerprint(fullMethod string, req proto.Message) ([]byte, error) {
	return appendFingerprint(make([]byte, 0, fingerprintSize), fullMethod, req)
}

// appendFingerprint appends [Fingerprint]'s fingerprint to dst.
func appendFingerprint(dst []byte, fullMethod string, req proto.Message) ([]byte, error) {
	buf := getBuffer()
	defer putBuffer(buf)
	b, err := fingerprintInput((*buf)[:0], fullMethod, req)
	*buf = b
	if err != nil {
		return nil, err
	}
	return appendFingerprintOfInput(dst, b), nil
}

// fingerprintInput appends to dst what [Fingerprint] hashes: the length of
// fullMethod, fullMethod, and req's deterministic proto encoding.
func fingerprintInput(dst []byte, fullMethod string, req proto.Message) ([]byte, error) {
	b := binary.AppendUvarint(dst, uint64(len(fullMethod)))
	b = append(b, fullMethod...)
	return deterministic.MarshalAppend(b, req)
}

// appendFingerprintOfInput appends to dst [Fingerprint]'s fingerprint of
// input, a [fingerprintInput].
func appendFingerprintOfInput(dst, input []byte) []byte {
	sum := sha256.Sum256(input)
	dst = append(dst, fingerprintVersion)
	return append(dst, sum[:]...)
}
