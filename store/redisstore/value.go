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
	// stateKept is an in-flight entry claimed with [store.ClaimOptions.Keep]
	// (layout 2 only): its fingerprint is followed by keptTrailerLen bytes,
	// Keep in milliseconds and the attempt count. It is abandoned once its
	// key's PTTL is down to Keep or less.
	stateKept = 'k'
)

// keptTrailerLen is the length of what follows the fingerprint of a kept
// entry: Keep in milliseconds (8 bytes, big-endian) and the attempt count
// (4 bytes, big-endian). The scripts read both from the end of the value.
const keptTrailerLen = 8 + 4

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

// encodeKept returns the layout 2 entry of a claim with Keep (keep
// milliseconds, positive) as the given attempt: the entry of
// encodeInFlight with state 'k' and, after the fingerprint,
//
//	keep (8 bytes, big-endian, milliseconds) | attempt (4 bytes, big-endian)
func encodeKept(token string, fingerprint []byte, keep int64, attempt uint32) []byte {
	b := make([]byte, 0, headerLen(len(token), len(fingerprint))+keptTrailerLen)
	b = append(b, layoutVersion, stateKept, byte(len(token)))
	b = append(b, token...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(fingerprint)))
	b = append(b, fingerprint...)
	b = binary.BigEndian.AppendUint64(b, uint64(keep))
	return binary.BigEndian.AppendUint32(b, attempt)
}

// decoded is a layout 2 entry as decodeEntry reads it.
type decoded struct {
	// entry is the entry; a kept entry ('k') is in flight here, as
	// whether its lease ran out depends on its key's PTTL.
	entry store.Entry
	// token is the owner token: the token that claimed the entry, and,
	// once completed, the token that completed it.
	token string
	// keep is the Keep of a kept entry in milliseconds, 0 otherwise.
	keep int64
	// attempt is the attempt count: that of a kept entry, 1 for an 'i'
	// entry (only a kept entry is ever taken over), 0 once completed (the
	// layout does not keep it).
	attempt int
}

// kept reports whether d is a kept in-flight entry ('k').
func (d decoded) kept() bool { return d.keep > 0 }

// state is the state of d, given its key's PTTL in milliseconds: a kept
// entry whose PTTL is down to its Keep is abandoned.
func (d decoded) state(pttl int64) store.State {
	if d.kept() && pttl <= d.keep {
		return store.StateAbandoned
	}
	return d.entry.State
}

// decodeValue reads a layout 2 entry and returns it with its owner token
// (see decodeEntry).
func decodeValue(v string) (store.Entry, string, error) {
	d, err := decodeEntry(v)
	return d.entry, d.token, err
}

// decodeEntry reads a layout 2 entry. Anything that is not a well-formed
// layout 2 entry, down to an in-flight entry with bytes after its
// fingerprint (after its Keep and attempt count, for a kept one), gives an
// error wrapping [store.ErrCorrupt]. Fingerprint and Data share one copy
// of v.
func decodeEntry(v string) (decoded, error) {
	if len(v) < headerLen(0, 0) || v[0] != layoutVersion {
		return decoded{}, corrupt("key holds a Redis string that is not an idempotency entry (%d bytes, first byte %#x)", len(v), firstByte(v))
	}
	tl := int(v[2])
	if len(v) < headerLen(tl, 0) {
		return decoded{}, corrupt("entry of %d bytes is shorter than its %d-byte token", len(v), tl)
	}
	token := v[3 : 3+tl]
	fl := int(v[3+tl])<<8 | int(v[4+tl])
	hl := headerLen(tl, fl)
	if len(v) < hl {
		return decoded{}, corrupt("entry of %d bytes is shorter than its %d-byte fingerprint", len(v), fl)
	}
	b := []byte(v[5+tl:])
	fp, data := b[:fl:fl], b[fl:]
	switch v[1] {
	case stateInFlight:
		if len(data) != 0 {
			return decoded{}, corrupt("in-flight entry has %d bytes after its fingerprint", len(data))
		}
		return decoded{entry: store.Entry{State: store.StateInFlight, Fingerprint: fp}, token: token, attempt: 1}, nil
	case stateKept:
		if len(data) != keptTrailerLen {
			return decoded{}, corrupt("kept entry has %d bytes after its fingerprint, want %d", len(data), keptTrailerLen)
		}
		keep, attempt := binary.BigEndian.Uint64(data), binary.BigEndian.Uint32(data[8:])
		if keep == 0 || keep > uint64(maxKeepMillis) || attempt == 0 {
			return decoded{}, corrupt("kept entry has keep %d ms and attempt %d", keep, attempt)
		}
		return decoded{entry: store.Entry{State: store.StateInFlight, Fingerprint: fp}, token: token, keep: int64(keep), attempt: int(attempt)}, nil
	case stateCompleted:
		return decoded{entry: store.Entry{State: store.StateCompleted, Fingerprint: fp, Data: data}, token: token}, nil
	}
	return decoded{}, corrupt("entry has unknown state %#x", v[1])
}

// maxKeepMillis is the longest Keep a kept entry holds: math.MaxInt64
// nanoseconds in milliseconds, rounded up, which the scripts read exactly
// (below 2^53).
const maxKeepMillis = math.MaxInt64/int64(1e6) + 1

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
