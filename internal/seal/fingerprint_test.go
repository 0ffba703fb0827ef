package seal_test

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/seal"
)

// A keyed fingerprint is 0x02, the key ID's length and the ID, and an
// HMAC-SHA256: the same for the same key, scope, kind and data, and
// another when any of them differs, so that an input of one kind never
// keys to the fingerprint of another.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	k := seal.Derive(secret(1), "acme")
	data := []byte("request")
	fp := k.Fingerprint([]byte("dst:"), "k1", seal.OfInput, data)
	if !bytes.HasPrefix(fp, []byte("dst:\x02\x02k1")) || len(fp) != len("dst:")+4+sha256.Size {
		t.Fatalf("Fingerprint = %x: want dst:, 02 02 k1 and 32 bytes", fp)
	}
	fp = fp[len("dst:"):]
	if again := k.Fingerprint(nil, "k1", seal.OfInput, data); !bytes.Equal(again, fp) {
		t.Errorf("the same fingerprint keyed twice: %x, then %x", fp, again)
	}
	for name, other := range map[string][]byte{
		"another kind":   k.Fingerprint(nil, "k1", seal.OfFingerprint, data),
		"another scope":  seal.Derive(secret(1), "globex").Fingerprint(nil, "k1", seal.OfInput, data),
		"another secret": seal.Derive(secret(2), "acme").Fingerprint(nil, "k1", seal.OfInput, data),
		"another input":  k.Fingerprint(nil, "k1", seal.OfInput, []byte("request2")),
	} {
		if bytes.Equal(other[4:], fp[4:]) {
			t.Errorf("%s: the same MAC %x", name, other)
		}
	}
	if n := len(k.Fingerprint(nil, strings.Repeat("k", seal.MaxKeyID), seal.OfFingerprint, data)); n != seal.MaxFingerprint {
		t.Errorf("the fingerprint of the longest key ID is %d bytes, MaxFingerprint %d", n, seal.MaxFingerprint)
	}
}

// FingerprintKeyID reads the key ID of a keyed fingerprint, and of
// nothing else: an unkeyed fingerprint (0x01 and a SHA-256) or any other
// bytes a store holds.
func TestFingerprintKeyID(t *testing.T) {
	t.Parallel()
	fp := seal.Derive(secret(1), "").Fingerprint(nil, "k1", seal.OfInput, nil)
	unkeyed := append([]byte{1}, make([]byte, sha256.Size)...)
	for name, tc := range map[string]struct {
		fp []byte
		id string
		ok bool
	}{
		"keyed":        {fp, "k1", true},
		"unkeyed":      {unkeyed, "", false},
		"cut":          {fp[:len(fp)-1], "", false},
		"one too long": {append(bytes.Clone(fp), 0), "", false},
		"empty ID":     {append([]byte{2, 0}, make([]byte, sha256.Size)...), "", false},
		"empty":        {nil, "", false},
		"version only": {[]byte{2}, "", false},
	} {
		id, ok := seal.FingerprintKeyID(tc.fp)
		if string(id) != tc.id || ok != tc.ok {
			t.Errorf("%s: FingerprintKeyID = %q, %v; want %q, %v", name, id, ok, tc.id, tc.ok)
		}
	}
}
