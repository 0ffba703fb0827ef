package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// env is what a case works with: a store of its own, the context to call
// it with, and checks that fail the case with a clear message.
type env struct {
	t         *testing.T
	s         store.Store
	ctx       context.Context
	lease     time.Duration
	retention time.Duration
	// notInspectable is WithoutInspection.
	notInspectable bool
}

func (s *suite) begin(t *testing.T) *env {
	t.Helper()
	st := s.newStore(t)
	if st == nil {
		t.Fatal("newStore returned nil")
	}
	return &env{t: t, s: st, ctx: t.Context(), lease: s.lease, retention: s.retention, notInspectable: s.notInspectable}
}

// key returns a key no other case (or run) uses: the subtest name and a
// random suffix.
func (e *env) key() string {
	return e.t.Name() + "/" + rand.Text()
}

// fingerprint returns 32 random bytes with a zero byte and a 0xff byte in
// them, so a store that is not binary-safe shows it.
func fingerprint() []byte {
	fp := make([]byte, 32)
	_, _ = rand.Read(fp)
	fp[1], fp[2] = 0x00, 0xff
	return fp
}

// probe is the fingerprint the checks claim with: never the one stored, so
// a store that echoes the caller's fingerprint fails.
var probe = []byte("storetest: probe fingerprint")

// randomData returns n random bytes.
func randomData(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// claimWin claims key and fails the case unless the claim is won.
func (e *env) claimWin(key string, fp []byte, lease time.Duration) string {
	e.t.Helper()
	c, err := e.s.Claim(e.ctx, key, fp, lease, store.ClaimOptions{})
	if err != nil {
		e.t.Fatalf("Claim(%q) of a free key: %v", key, err)
	}
	if !c.Won() || c.Token == "" {
		e.t.Fatalf("Claim(%q) of a free key: not won, existing entry %s", key, describe(c.Existing))
	}
	if c.Existing.State != 0 || c.Existing.Fingerprint != nil || c.Existing.Data != nil {
		e.t.Fatalf("Claim(%q) won but Existing is not zero: %s", key, describe(c.Existing))
	}
	if c.Attempt != 1 || !c.Previous.IsZero() {
		e.t.Fatalf("Claim(%q) of a free key: attempt %d, previous %v, want attempt 1 and no previous", key, c.Attempt, c.Previous)
	}
	return c.Token
}

// claimLose claims key with the probe fingerprint and fails the case
// unless the key is taken; it returns the existing entry.
func (e *env) claimLose(key string) store.Entry {
	e.t.Helper()
	c, err := e.s.Claim(e.ctx, key, probe, longTTL, store.ClaimOptions{})
	if err != nil {
		e.t.Fatalf("Claim(%q) of a taken key: %v", key, err)
	}
	if c.Won() {
		e.t.Fatalf("Claim(%q) of a taken key won (token %q)", key, c.Token)
	}
	return c.Existing
}

// wantInFlight fails the case unless key holds an in-flight entry claimed
// with fp.
func (e *env) wantInFlight(key string, fp []byte) {
	e.t.Helper()
	got := e.claimLose(key)
	if got.State != store.StateInFlight || !bytes.Equal(got.Fingerprint, fp) || got.Data != nil {
		e.t.Fatalf("entry of %q = %s, want in_flight with fingerprint %x and nil data", key, describe(got), fp)
	}
}

// wantCompleted fails the case unless key holds a completed entry with fp
// and data (nil and empty data compare equal).
func (e *env) wantCompleted(key string, fp, data []byte) {
	e.t.Helper()
	got := e.claimLose(key)
	if got.State != store.StateCompleted || !bytes.Equal(got.Fingerprint, fp) {
		e.t.Fatalf("entry of %q = %s, want completed with fingerprint %x", key, describe(got), fp)
	}
	if !bytes.Equal(got.Data, data) {
		e.t.Fatalf("data of %q: got %d bytes %s, want %d bytes %s", key, len(got.Data), head(got.Data), len(data), head(data))
	}
}

// wantFree fails the case unless key is free; it claims it (with a long
// lease) and returns the token.
func (e *env) wantFree(key string) string {
	e.t.Helper()
	return e.claimWin(key, fingerprint(), longTTL)
}

// wantLeaseLost fails the case unless err matches [store.ErrLeaseLost].
func (e *env) wantLeaseLost(op string, err error) {
	e.t.Helper()
	if !errors.Is(err, store.ErrLeaseLost) {
		e.t.Fatalf("%s: got error %v, want one matching store.ErrLeaseLost", op, err)
	}
}

// ok fails the case when err is not nil.
func (e *env) ok(op string, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", op, err)
	}
}

// complete completes key with a long retention and fails on error.
func (e *env) complete(key, token string, data []byte) {
	e.t.Helper()
	e.ok("Complete with the owner token", e.s.Complete(e.ctx, key, token, data, longTTL))
}

func describe(en store.Entry) string {
	return fmt.Sprintf("%s fingerprint=%s data=%s", en.State, head(en.Fingerprint), head(en.Data))
}

// head renders the first bytes of b in hex, or nil.
func head(b []byte) string {
	if b == nil {
		return "nil"
	}
	n := min(len(b), 16)
	s := fmt.Sprintf("[%x", b[:n])
	if len(b) > n {
		s += "..."
	}
	return s + "]"
}

// sleepPast sleeps until a TTL of d set now has surely run out.
func sleepPast(d time.Duration) {
	time.Sleep(d + d/2 + 10*time.Millisecond)
}
