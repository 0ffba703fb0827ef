package storetest

import (
	"bytes"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
)

func claimCases() []testCase {
	return []testCase{
		{"NewKeyWins", func(t *testing.T, e *env) {
			key := e.key()
			if tok := e.claimWin(key, fingerprint(), longTTL); tok == "" {
				t.Fatal("won claim has an empty token")
			}
		}},
		{"SecondClaimSeesInFlight", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			e.claimWin(key, fp, longTTL)
			c, err := e.s.Claim(e.ctx, key, fp, longTTL, store.ClaimOptions{})
			e.ok("second Claim", err)
			if c.Won() || c.Token != "" {
				t.Fatalf("second Claim won with token %q", c.Token)
			}
			got := c.Existing
			if got.State != store.StateInFlight || !bytes.Equal(got.Fingerprint, fp) || got.Data != nil {
				t.Fatalf("second Claim: existing %s, want in_flight, fingerprint %x, nil data", describe(got), fp)
			}
		}},
		{"ExistingReportsStoredFingerprint", func(t *testing.T, e *env) {
			// A caller with another fingerprint sees the first caller's,
			// in flight and completed: the interceptor detects key reuse
			// from it.
			key, fp := e.key(), fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			e.wantInFlight(key, fp)
			e.complete(key, tok, []byte("outcome"))
			e.wantCompleted(key, fp, []byte("outcome"))
		}},
		{"KeysAreIndependent", func(t *testing.T, e *env) {
			// Keys that share a prefix, differ in case or only in a
			// trailing byte are distinct keys.
			base := e.key()
			keys := []string{base, base + "x", base + "X", base + "\x00", base[:len(base)-1]}
			fps := make([][]byte, len(keys))
			for i, k := range keys {
				fps[i] = fingerprint()
				e.claimWin(k, fps[i], longTTL)
			}
			for i, k := range keys {
				e.wantInFlight(k, fps[i])
			}
		}},
		{"BinaryKey", func(t *testing.T, e *env) {
			// Keys are opaque bytes: the interceptor may pass a raw hash.
			key := e.key() + "\x00\xff\r\n \xc3\x28" + string(randomData(32))
			fp := fingerprint()
			tok := e.claimWin(key, fp, longTTL)
			e.wantInFlight(key, fp)
			e.complete(key, tok, []byte{0, 1, 2})
			e.wantCompleted(key, fp, []byte{0, 1, 2})
		}},
		{"ClaimCopiesFingerprint", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			mine := bytes.Clone(fp)
			e.claimWin(key, mine, longTTL)
			for i := range mine {
				mine[i] ^= 0xff
			}
			e.wantInFlight(key, fp)
		}},
	}
}
