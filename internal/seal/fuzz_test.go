package seal_test

import (
	"bytes"
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/seal"
)

// Whatever bytes a store holds in place of a sealed record, KeyID,
// IsSealed, FingerprintKeyID and Open never panic, and nothing but the
// record sealed opens: a forgery, however close, is refused. (Moved from
// the root package's FuzzSealedRecord, which opened through a server.)
func FuzzOpen(f *testing.F) {
	g := loadGolden(f)
	k := seal.Derive(g.secret, g.scope)
	f.Add(g.sealed)
	f.Add(g.sealed[:len(g.sealed)-1])
	f.Add(g.fp)
	f.Add([]byte{0, 'S', 1, 2, 'k', '1'})
	f.Add([]byte{0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		seal.IsSealed(data)
		seal.FingerprintKeyID(data)
		id, parsed := seal.KeyID(data)
		plain, ok := k.Open(nil, data, g.storeKey)
		if ok && (!parsed || !bytes.Equal(data, g.sealed) || !bytes.Equal(plain, g.plain)) {
			t.Fatalf("a forged sealed record opened, naming key %q: %x", id, data)
		}
	})
}
