package redisstore

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/grpc-idempotency/idempotency/store"
)

// layoutVersion is the first byte of every entry the store writes: layout 2,
// one Redis string. Layout 1, written by earlier releases, is a hash (see
// the package documentation); it is still read and settled.
const layoutVersion = 2

// State bytes of a layout 2 entry, and state values of a layout 1 hash's
// "s" field.
const (
	stateInFlight  = 'i'
	stateCompleted = 'c'
)

// maxTokenLen and maxFingerprintLen are the longest token and fingerprint
// a layout 2 entry can hold: their lengths are stored in one and two bytes.
const (
	maxTokenLen       = math.MaxUint8
	maxFingerprintLen = math.MaxUint16
)

// headerLen is the length of a layout 2 entry before its data: version,
// state, token length, token, fingerprint length, fingerprint.
func headerLen(token, fingerprint int) int { return 3 + token + 2 + fingerprint }

// encodeInFlight returns the layout 2 entry of a new claim:
//
//	version (1 byte, 2) | state (1 byte, 'i') |
//	token length (1 byte) | token |
//	fingerprint length (2 bytes, big-endian) | fingerprint
//
// A completed entry is the same with state 'c' and the data appended.
func encodeInFlight(token string, fingerprint []byte) []byte {
	b := make([]byte, 0, headerLen(len(token), len(fingerprint)))
	b = append(b, layoutVersion, stateInFlight, byte(len(token)))
	b = append(b, token...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(fingerprint)))
	return append(b, fingerprint...)
}

// decodeValue reads a layout 2 entry and returns it with its owner token
// (the token that claimed it, and, once completed, the token that completed
// it). Anything that is not a well-formed layout 2 entry, down to an
// in-flight entry with bytes after its fingerprint, gives an error wrapping
// [store.ErrCorrupt]. Fingerprint and Data share one copy of v.
func decodeValue(v string) (store.Entry, string, error) {
	if len(v) < headerLen(0, 0) || v[0] != layoutVersion {
		return store.Entry{}, "", corrupt("key holds a Redis string that is not an idempotency entry (%d bytes, first byte %#x)", len(v), firstByte(v))
	}
	tl := int(v[2])
	if len(v) < headerLen(tl, 0) {
		return store.Entry{}, "", corrupt("entry of %d bytes is shorter than its %d-byte token", len(v), tl)
	}
	token := v[3 : 3+tl]
	fl := int(v[3+tl])<<8 | int(v[4+tl])
	hl := headerLen(tl, fl)
	if len(v) < hl {
		return store.Entry{}, "", corrupt("entry of %d bytes is shorter than its %d-byte fingerprint", len(v), fl)
	}
	b := []byte(v[5+tl:])
	fp, data := b[:fl:fl], b[fl:]
	switch v[1] {
	case stateInFlight:
		if len(data) != 0 {
			return store.Entry{}, "", corrupt("in-flight entry has %d bytes after its fingerprint", len(data))
		}
		return store.Entry{State: store.StateInFlight, Fingerprint: fp}, token, nil
	case stateCompleted:
		return store.Entry{State: store.StateCompleted, Fingerprint: fp, Data: data}, token, nil
	}
	return store.Entry{}, "", corrupt("entry has unknown state %#x", v[1])
}

func firstByte(v string) any {
	if v == "" {
		return "none"
	}
	return v[0]
}

// checkClaimArgs refuses a fingerprint the layout cannot hold.
func checkClaimArgs(fingerprint []byte) error {
	if len(fingerprint) > maxFingerprintLen {
		return fmt.Errorf("redisstore: fingerprint of %d bytes is over the %d the layout holds", len(fingerprint), maxFingerprintLen)
	}
	return nil
}
