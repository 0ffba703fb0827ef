package idempotency_test

import (
	"bytes"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/adminhook"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestSealedOverStores: with WithSealing, on every store (memory, Redis
// on one node and on a Cluster, PostgreSQL, MySQL, and migratestore from
// Redis to PostgreSQL), each entry point (a unary gRPC call, a
// server-streaming call, Do, the HTTP middleware) runs once, its retry
// replays it byte for byte, marked, and nothing the store holds for the
// entry gives the answer away: neither what the store's Lookup returns
// nor the bytes read from the backend itself (the Redis value, the row's
// columns) contain a secret of the answer or the digest of the unkeyed
// fingerprint; the record names the primary key (SealedBy), its
// fingerprint is keyed by it, and the server opens it to the answer for
// package admin (adminhook.OpenRecord). The same calls through a server
// without sealing store the secrets and the unkeyed fingerprint, so the
// checks can fail.
func TestSealedOverStores(t *testing.T) {
	t.Parallel()
	const tag = "over-stores"
	unkeyed := map[string][]byte{}
	plain := newSealedRig(t, testkit.NewMemoryStore(t), tag)
	for _, e := range plain.entries {
		if a := e.call(t.Context(), "order-"+e.name); a.err != nil || a.corrupt {
			t.Fatalf("%s without sealing: %+v", e.name, a)
		}
		info := sealedLookup(t, plain.srv, e, "order-"+e.name)
		for _, s := range e.secrets {
			if !bytes.Contains(info.Data, []byte(s)) {
				t.Fatalf("%s without sealing: the record does not hold %q, so its absence proves nothing", e.name, s)
			}
		}
		if e.request != nil {
			fp, err := idempotency.Fingerprint(e.op, e.request)
			if err != nil || !bytes.Equal(fp, info.Fingerprint) {
				t.Fatalf("%s without sealing: fingerprint %x, want idempotency.Fingerprint's %x (%v)", e.name, info.Fingerprint, fp, err)
			}
		}
		unkeyed[e.name] = info.Fingerprint
	}

	for name, newBackend := range sealedBackends(false) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t)
			rig := newSealedRig(t, b.store, tag, sealedWith(sealedKey("k1", 1)))
			for _, e := range rig.entries {
				t.Run(e.name, func(t *testing.T) {
					ctx, key := t.Context(), "order-"+e.name
					first := e.call(ctx, key)
					if first.err != nil || first.corrupt || first.replayed {
						t.Fatalf("first call: %+v; want an answer, not replayed", first)
					}
					again := e.call(ctx, key)
					if again.err != nil || !again.replayed || !bytes.Equal(again.bytes, first.bytes) {
						t.Fatalf("retry: %+v; want %q, replayed", again, first.bytes)
					}
					if n := e.runs(); n != 1 {
						t.Fatalf("the handler ran %d times, want 1", n)
					}

					info := sealedLookup(t, rig.srv, e, key)
					if info.State != store.StateCompleted {
						t.Fatalf("entry in state %v, want completed", info.State)
					}
					wantNoSealedSecret(t, "Lookup's data", info.Data, e.secrets)
					wantNoSealedSecret(t, "Lookup's fingerprint", info.Fingerprint, e.secrets)
					if id, ok := idempotency.SealedBy(info.Data); !ok || id != "k1" {
						t.Errorf("SealedBy = %q, %v; want k1, true", id, ok)
					}
					wantSealedFingerprint(t, "Lookup", info.Fingerprint, unkeyed[e.name], "k1")

					raw := b.raw(t, info.Key)
					read := raw == nil // the memory store has no backend to read
					for i, v := range raw {
						wantNoSealedSecret(t, "the backend's bytes", v, e.secrets)
						if bytes.Contains(v, unkeyed[e.name][1:]) {
							t.Errorf("the backend's bytes %d hold the unkeyed fingerprint", i)
						}
						read = read || bytes.Contains(v, info.Data)
					}
					if !read {
						t.Errorf("no bytes read from the backend hold the record Lookup returned: read the wrong entry")
					}

					rec, id, err := adminhook.OpenRecord(rig.srv, ctx, info.Key, "", info.Data)
					if err != nil || id != "k1" || !bytes.Contains(rec, []byte(e.secrets[0])) {
						t.Errorf("OpenRecord = %d bytes, %q, %v; want the answer, sealed by k1", len(rec), id, err)
					}
				})
			}
		})
	}
}
