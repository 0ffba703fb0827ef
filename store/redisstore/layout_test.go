package redisstore_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/redistest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// TestLayout checks the documented layout: one hash under prefix+key with
// fields s, f, o while in flight and s, f, d once completed, TTLs in
// milliseconds.
func TestLayout(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	key, fingerprint := newKey(t), fp()
	rkey := redisstore.DefaultPrefix + key

	c, err := st.Claim(ctx, key, fingerprint, 1500*time.Millisecond)
	if err != nil || !c.Won() {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	if len(c.Token) != 22 {
		t.Errorf("token %q has %d characters, want 22 (16 bytes, base64url)", c.Token, len(c.Token))
	}
	got := rdb.HGetAll(ctx, rkey).Val()
	want := map[string]string{"s": "i", "f": string(fingerprint), "o": c.Token}
	if !equalMaps(got, want) {
		t.Fatalf("in-flight hash = %q, want %q", got, want)
	}
	if pttl := rdb.PTTL(ctx, rkey).Val(); pttl <= time.Second || pttl > 1500*time.Millisecond {
		t.Errorf("PTTL after a 1.5s lease = %v", pttl)
	}

	if err := st.Complete(ctx, key, c.Token, []byte("data"), 90*time.Second); err != nil {
		t.Fatal(err)
	}
	got = rdb.HGetAll(ctx, rkey).Val()
	want = map[string]string{"s": "c", "f": string(fingerprint), "d": "data", "o": c.Token}
	if !equalMaps(got, want) {
		t.Fatalf("completed hash = %q, want %q", got, want)
	}
	if pttl := rdb.PTTL(ctx, rkey).Val(); pttl <= 89*time.Second || pttl > 90*time.Second {
		t.Errorf("PTTL after a 90s retention = %v", pttl)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestPrefix checks that WithPrefix decides where keys land, and that
// stores with different prefixes on one Redis do not see each other.
func TestPrefix(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	a := redisstore.New(rdb)
	b := redisstore.New(rdb, redisstore.WithPrefix("tenant-b:"))
	key := newKey(t)
	fpA, fpB := fp(), fp()
	if c, err := a.Claim(ctx, key, fpA, longTTL); err != nil || !c.Won() {
		t.Fatalf("a.Claim = %+v, %v", c, err)
	}
	if c, err := b.Claim(ctx, key, fpB, longTTL); err != nil || !c.Won() {
		t.Fatalf("b.Claim of the same key under another prefix = %+v, %v; want a win", c, err)
	}
	for prefix, want := range map[string][]byte{"idempotency:": fpA, "tenant-b:": fpB} {
		got, err := rdb.HGet(ctx, prefix+key, "f").Bytes()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("HGET %s f = %x, %v; want %x", prefix+key, got, err, want)
		}
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Errorf("the bare key %q exists", key)
	}
}

// TestNonPositiveTTL checks that a zero or negative lease or retention is
// refused without touching Redis, rather than turned into PEXPIRE 0, which
// deletes the key.
func TestNonPositiveTTL(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	key := newKey(t)
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := st.Claim(ctx, key, fp(), d); err == nil {
			t.Errorf("Claim with lease %v succeeded", d)
		}
	}
	c, err := st.Claim(ctx, key, fp(), longTTL)
	if err != nil || !c.Won() {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	if err := st.Extend(ctx, key, c.Token, 0); err == nil || errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Extend with lease 0 = %v, want an argument error", err)
	}
	if err := st.Complete(ctx, key, c.Token, nil, 0); err == nil || errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Complete with retention 0 = %v, want an argument error", err)
	}
	// Sub-millisecond TTLs round up to 1ms instead of deleting the key.
	if err := st.Extend(ctx, key, c.Token, time.Microsecond); err != nil {
		t.Errorf("Extend with a 1µs lease: %v", err)
	}
}
