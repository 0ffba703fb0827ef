package redisstore_test

import (
	"crypto/rand"
	"testing"
	"time"
)

// longTTL is the lease and retention of cases that are not about expiry.
const longTTL = time.Minute

// newKey returns a key no other case uses.
func newKey(t *testing.T) string {
	t.Helper()
	return t.Name() + "/" + rand.Text()
}

// fp returns a fresh 32-byte fingerprint.
func fp() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}
