package store

import (
	"crypto/rand"
	"encoding/base64"
	"time"
)

// Owner tokens made by [NewToken]: a version character followed by the
// base64url text of 18 bytes, a 48-bit big-endian count of milliseconds
// since the Unix epoch (the claim time) and 96 random bits.
const (
	tokenVersion = '1'
	tokenTimeLen = 6
	tokenRandLen = 12
	tokenBytes   = tokenTimeLen + tokenRandLen
	tokenLen     = 1 + tokenBytes/3*4 // 25 characters: 18 bytes are 24 base64 characters, with no padding
)

// NewToken returns a fresh owner token that carries its claim time, for a
// Store that makes its owner tokens at random (the Redis and PostgreSQL
// stores do): 25 characters, the version character '1' followed by the
// base64url text of the current time in milliseconds since the Unix
// epoch (48 bits) and 96 random bits from crypto/rand. The random bits
// alone make it unique and unguessable; [TokenTime] reads the time back,
// so a store learns when an entry was claimed without storing anything
// more than its token.
//
// The time is the clock of the process that calls NewToken (the server
// that claimed), not the store's: [Info.Claimed] of such an entry is off
// by that server's clock skew.
func NewToken() string {
	var b [tokenBytes]byte
	ms := uint64(max(time.Now().UnixMilli(), 0))
	for i := tokenTimeLen - 1; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[tokenTimeLen:]) // crypto/rand.Read never fails
	var t [tokenLen]byte
	t[0] = tokenVersion
	base64.RawURLEncoding.Encode(t[1:], b[:])
	return string(t[:])
}

// TokenTime returns the claim time a token made by [NewToken] carries, at
// millisecond precision, and reports whether token is one. Any other
// string (the 22-character random tokens of earlier releases, the memory
// store's counters, a token of another store) gives the zero Time and
// false: its claim time is unknown. It never panics, whatever token holds.
func TokenTime(token string) (time.Time, bool) {
	if len(token) != tokenLen || token[0] != tokenVersion {
		return time.Time{}, false
	}
	var b [tokenBytes]byte
	if _, err := base64.RawURLEncoding.Strict().Decode(b[:], []byte(token[1:])); err != nil {
		return time.Time{}, false
	}
	var ms int64
	for _, c := range b[:tokenTimeLen] {
		ms = ms<<8 | int64(c)
	}
	return time.UnixMilli(ms), true
}
