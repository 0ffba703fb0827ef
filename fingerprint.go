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

// fingerprintOf returns the fingerprint of a call's requests under id:
// f's of the one request of a unary or server-streaming call, and for a
// client stream of any other length, a version byte and SHA-256 over the
// number of messages and f's fingerprint of each, in order, so that the
// same messages in another order, or one more or one fewer, make another
// fingerprint.
func fingerprintOf(f FingerprintFunc, id string, reqs []proto.Message) ([]byte, error) {
	if len(reqs) == 1 {
		return f(id, reqs[0])
	}
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(reqs))))
	for _, r := range reqs {
		fp, err := f(id, r)
		if err != nil {
			return nil, err
		}
		h.Write(binary.AppendUvarint(nil, uint64(len(fp))))
		h.Write(fp)
	}
	return h.Sum([]byte{fingerprintVersion}), nil
}

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
