package store_test

import (
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
)

// BenchmarkNewToken compares NewToken with the owner tokens the networked
// stores made before it (random-22: 16 random bytes, 22 characters of
// base64url, no time), the cost it adds to each of their claims.
func BenchmarkNewToken(b *testing.B) {
	b.Run("random-22", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r [16]byte
			_, _ = rand.Read(r[:])
			_ = base64.RawURLEncoding.EncodeToString(r[:])
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = store.NewToken()
		}
	})
}
