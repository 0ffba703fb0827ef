package seal_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/seal"
)

// golden is testdata/v1.json: a record a sealing server stored before this
// package existed (the root package's TestSealedRecordGolden replays it),
// with what it was sealed from. Every field but the IDs is in hex.
type golden struct {
	Secret           string `json:"secret"`
	KeyID            string `json:"key_id"`
	Scope            string `json:"scope"`
	StoreKey         string `json:"store_key"`
	FingerprintInput string `json:"fingerprint_input"`
	Fingerprint      string `json:"fingerprint"`
	Plaintext        string `json:"plaintext"`
	Sealed           string `json:"sealed"`
}

// goldenRecord is golden decoded.
type goldenRecord struct {
	secret, input, fp, plain, sealed []byte
	id, scope, storeKey              string
}

func loadGolden(tb testing.TB) goldenRecord {
	tb.Helper()
	raw, err := os.ReadFile("testdata/v1.json")
	if err != nil {
		tb.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(raw, &g); err != nil {
		tb.Fatal(err)
	}
	r := goldenRecord{id: g.KeyID, scope: g.Scope, storeKey: g.StoreKey}
	for dst, src := range map[*[]byte]string{&r.secret: g.Secret, &r.input: g.FingerprintInput, &r.fp: g.Fingerprint, &r.plain: g.Plaintext, &r.sealed: g.Sealed} {
		if *dst, err = hex.DecodeString(src); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

// A record sealed by an earlier build opens, to the record it sealed,
// under the key derived as it was; the fingerprint keyed then is keyed
// alike now; and both name their key.
func TestGolden(t *testing.T) {
	t.Parallel()
	g := loadGolden(t)
	k := seal.Derive(g.secret, g.scope)
	plain, ok := k.Open(nil, g.sealed, g.storeKey)
	if !ok || !bytes.Equal(plain, g.plain) {
		t.Errorf("Open(golden) = %x, %v; want %x", plain, ok, g.plain)
	}
	if fp := k.Fingerprint(nil, g.id, seal.OfInput, g.input); !bytes.Equal(fp, g.fp) {
		t.Errorf("Fingerprint = %x, want the golden %x", fp, g.fp)
	}
	if id, ok := seal.KeyID(g.sealed); !ok || string(id) != g.id {
		t.Errorf("KeyID = %q, %v; want %q", id, ok, g.id)
	}
	if id, ok := seal.FingerprintKeyID(g.fp); !ok || string(id) != g.id {
		t.Errorf("FingerprintKeyID = %q, %v; want %q", id, ok, g.id)
	}
	if !seal.IsSealed(g.sealed) || seal.IsSealed(g.plain) {
		t.Errorf("IsSealed: sealed %v, its plaintext %v; want true, false", seal.IsSealed(g.sealed), seal.IsSealed(g.plain))
	}
}
