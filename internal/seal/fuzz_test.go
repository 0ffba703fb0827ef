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

// Whatever record, store key and scope, a record sealed opens, appended
// to what dst held, under the scope's key for its store key, and under
// no other store key or scope: the round trip a server makes from the
// outcome it stores to the replay it reads back.
func FuzzSealOpen(f *testing.F) {
	g := loadGolden(f)
	f.Add(g.plain, g.storeKey, g.scope)
	f.Add([]byte{}, "", "")
	f.Add([]byte{0}, "k", "\x00")
	f.Fuzz(func(t *testing.T, rec []byte, storeKey, scope string) {
		k := seal.Derive(g.secret, scope)
		sealed := k.Seal([]byte("dst:"), g.id, storeKey, rec)
		if !bytes.HasPrefix(sealed, []byte("dst:")) {
			t.Fatalf("Seal dropped what dst held: %x", sealed)
		}
		sealed = sealed[len("dst:"):]
		if id, ok := seal.KeyID(sealed); !ok || string(id) != g.id || !seal.IsSealed(sealed) {
			t.Fatalf("KeyID of a sealed record = %q, %v; want %q", id, ok, g.id)
		}
		plain, ok := k.Open([]byte("out:"), sealed, storeKey)
		if !ok || !bytes.Equal(plain, append([]byte("out:"), rec...)) {
			t.Fatalf("Open = %x, %v; want out: and %x", plain, ok, rec)
		}
		if _, ok := k.Open(nil, sealed, storeKey+"\x00"); ok {
			t.Errorf("the record opened for another store key")
		}
		if _, ok := seal.Derive(g.secret, scope+"\x00").Open(nil, sealed, storeKey); ok {
			t.Errorf("the record opened for another scope")
		}
	})
}
