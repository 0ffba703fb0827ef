package seal_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/seal"
)

func secret(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// Seal writes the documented format, a fresh nonce each time, and Open
// gives the record back appended to dst.
func TestSealOpen(t *testing.T) {
	t.Parallel()
	k := seal.Derive(secret(1), "acme")
	rec := []byte("\x08\x02the record")
	a := k.Seal([]byte("prefix"), "k1", "store-key", rec)
	if !bytes.HasPrefix(a, []byte("prefix\x00S\x01\x02k1")) || len(a) != len("prefix")+4+2+12+len(rec)+16 {
		t.Fatalf("Seal = %x: want prefix, 00 'S' 01 02 k1, a 12-byte nonce, the ciphertext and a 16-byte tag", a)
	}
	a = a[len("prefix"):]
	b := k.Seal(nil, "k1", "store-key", rec)
	if bytes.Equal(a, b) || bytes.Equal(a[6:18], b[6:18]) {
		t.Errorf("two seals of one record share their nonce: %x, %x", a, b)
	}
	if bytes.Contains(a, rec[2:]) {
		t.Errorf("the sealed record holds the record in the clear: %x", a)
	}
	plain, ok := k.Open([]byte("dst:"), a, "store-key")
	if !ok || string(plain) != "dst:"+string(rec) {
		t.Errorf("Open = %q, %v; want dst: and the record", plain, ok)
	}
	if id, ok := seal.KeyID(a); !ok || string(id) != "k1" {
		t.Errorf("KeyID = %q, %v; want k1", id, ok)
	}
}

// A record opens only under the key it was sealed with, derived for its
// scope, for its store key, with every byte as sealed: edited, cut,
// moved, another scope's or another key's, it does not open.
func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	k := seal.Derive(secret(1), "acme")
	rec := []byte("\x08\x02the record")
	data := k.Seal(nil, "k1", "store-key", rec)
	for name, tc := range map[string]struct {
		k        *seal.Key
		storeKey string
	}{
		"another store key": {k, "store-key2"},
		"another scope":     {seal.Derive(secret(1), "globex"), "store-key"},
		"another secret":    {seal.Derive(secret(2), "acme"), "store-key"},
	} {
		if _, ok := tc.k.Open(nil, data, tc.storeKey); ok {
			t.Errorf("%s: the record opened", name)
		}
	}
	for i := range len(data) * 8 {
		flipped := bytes.Clone(data)
		flipped[i/8] ^= 1 << (i % 8)
		if plain, ok := k.Open(nil, flipped, "store-key"); ok {
			t.Fatalf("bit %d flipped: the record opened, to %x", i, plain)
		}
	}
	for n := range data {
		if _, ok := k.Open(nil, data[:n], "store-key"); ok {
			t.Fatalf("cut to %d bytes: the record opened", n)
		}
	}
	if _, ok := k.Open(nil, append(bytes.Clone(data), 0), "store-key"); ok {
		t.Errorf("a byte appended: the record opened")
	}
}

// KeyID reads the key ID of a sealed record of the known format, and
// nothing else; IsSealed tells a sealed record by its first byte.
func TestKeyID(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", seal.MaxKeyID)
	tail := make([]byte, 12+16)
	for name, tc := range map[string]struct {
		data   []byte
		id     string
		ok     bool
		sealed bool
	}{
		"sealed":             {seal.Derive(secret(1), "").Seal(nil, "k1", "", nil), "k1", true, true},
		"longest ID":         {seal.Derive(secret(1), "").Seal(nil, long, "", nil), long, true, true},
		"empty":              {nil, "", false, false},
		"magic only":         {[]byte{0}, "", false, true},
		"no tag":             {append([]byte{0, 'S', 1, 2, 'k', '1'}, tail[:27]...), "", false, true},
		"nothing sealed":     {append([]byte{0, 'S', 1, 2, 'k', '1'}, tail...), "k1", true, true},
		"empty ID":           {append([]byte{0, 'S', 1, 0}, tail...), "", false, true},
		"another format":     {append([]byte{0, 'T', 1, 2, 'k', '1'}, tail...), "", false, true},
		"another version":    {append([]byte{0, 'S', 2, 2, 'k', '1'}, tail...), "", false, true},
		"an unsealed record": {[]byte("\x08\x02"), "", false, false},
	} {
		id, ok := seal.KeyID(tc.data)
		if string(id) != tc.id || ok != tc.ok {
			t.Errorf("%s: KeyID = %q, %v; want %q, %v", name, id, ok, tc.id, tc.ok)
		}
		if got := seal.IsSealed(tc.data); got != tc.sealed {
			t.Errorf("%s: IsSealed = %v, want %v", name, got, tc.sealed)
		}
	}
}
