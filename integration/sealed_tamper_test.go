package idempotency_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/grpc-idempotency/idempotency"
)

// TestSealedTamperOverStores: on every networked store, a sealed record
// that whoever can write to the store edited (a bit flipped in its
// header, its key ID, its nonce, its ciphertext or its tag; cut short;
// lengthened) and wrote back through the store with the entry's own
// fingerprint is refused by every entry point as corrupt
// (IDEMPOTENCY_RECORD_CORRUPT: INTERNAL on gRPC, ErrRecordCorrupt from Do,
// 500 on HTTP), and the handler does not run again; the record put back
// replays. A record moved, with its fingerprint, to another key of the
// same request is refused as corrupt too: it is bound to its store key.
func TestSealedTamperOverStores(t *testing.T) {
	t.Parallel()
	for name, newBackend := range sealedBackends(true) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t)
			rig := newSealedRig(t, b.store, "tamper", sealedWith(sealedKey("k1", 1)))
			for _, e := range rig.entries {
				t.Run(e.name, func(t *testing.T) {
					ctx := t.Context()
					key := "tampered-" + e.name
					first := e.call(ctx, key)
					if first.err != nil || first.corrupt {
						t.Fatalf("first call: %+v", first)
					}
					good := sealedLookup(t, rig.srv, e, key)
					for what, bad := range sealedTampered(t, good.Data) {
						sealedRewrite(t, b.store, good.Key, good.Fingerprint, bad)
						if a := e.call(ctx, key); !a.corrupt {
							t.Errorf("%s: got %+v; want IDEMPOTENCY_RECORD_CORRUPT", what, a)
						}
					}
					if n := e.runs(); n != 1 {
						t.Fatalf("the handler ran %d times, want 1", n)
					}
					sealedRewrite(t, b.store, good.Key, good.Fingerprint, good.Data)
					if a := e.call(ctx, key); a.err != nil || !a.replayed || !bytes.Equal(a.bytes, first.bytes) {
						t.Fatalf("the record put back: %+v; want the first answer, replayed", a)
					}

					from, to := "moved-from-"+e.name, "moved-to-"+e.name
					for _, k := range []string{from, to} {
						if a := e.call(ctx, k); a.err != nil || a.corrupt || a.replayed {
							t.Fatalf("call with %s: %+v", k, a)
						}
					}
					src, dst := sealedLookup(t, rig.srv, e, from), sealedLookup(t, rig.srv, e, to)
					if !bytes.Equal(src.Fingerprint, dst.Fingerprint) {
						t.Fatal("one request has two fingerprints")
					}
					sealedRewrite(t, b.store, dst.Key, src.Fingerprint, src.Data)
					if a := e.call(ctx, to); !a.corrupt {
						t.Errorf("a record moved to another key: got %+v; want IDEMPOTENCY_RECORD_CORRUPT", a)
					}
					if n := e.runs(); n != 3 {
						t.Errorf("the handler ran %d times, want 3 (one per key)", n)
					}
				})
			}
		})
	}
}

// sealedTampered returns edits of a sealed record, by what they change: a
// bit flipped in each of its parts (magic, format, version, key ID length,
// key ID, nonce, ciphertext, tag), the record cut short, and one byte
// more.
func sealedTampered(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	id, ok := idempotency.SealedBy(data)
	if !ok {
		t.Fatalf("not a sealed record: %x", data)
	}
	nonce := 4 + len(id)
	bad := map[string][]byte{
		"cut short":     bytes.Clone(data[:len(data)-1]),
		"cut to header": bytes.Clone(data[:nonce]),
		"one byte more": append(bytes.Clone(data), 0),
	}
	for what, i := range map[string]int{
		"magic": 0, "format": 1, "version": 2, "key ID length": 3, "key ID": 4,
		"nonce": nonce, "ciphertext": nonce + 12, "ciphertext middle": (nonce + 12 + len(data) - 16) / 2, "tag": len(data) - 1,
	} {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(data)
			b[i] ^= bit
			bad[fmt.Sprintf("%s byte %d ^ %#x", what, i, bit)] = b
		}
	}
	return bad
}
