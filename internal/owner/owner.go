// Package owner makes the owner tokens of the networked stores.
package owner

import (
	"crypto/rand"
	"encoding/base64"
)

// NewToken returns a fresh owner token: 16 random bytes from crypto/rand,
// 22 characters of base64url.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
