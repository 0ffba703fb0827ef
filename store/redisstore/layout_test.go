package redisstore_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestLayout checks the documented layout 2: one string under prefix+key,
// version byte 2, state 'i', token and fingerprint with their lengths
// while in flight; state 'c' and the data appended once completed; TTLs
// in milliseconds.
func TestLayout(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	key, fingerprint := newKey(t), fp()
	rkey := redisstore.DefaultPrefix + key

	c, err := st.Claim(ctx, key, fingerprint, 1500*time.Millisecond, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	if _, ok := store.TokenTime(c.Token); !ok || len(c.Token) != 25 {
		t.Errorf("token %q (%d characters) is not one of store.NewToken", c.Token, len(c.Token))
	}
	header := append([]byte{2, 'i', 25}, c.Token...)
	header = append(header, 0, byte(len(fingerprint)))
	header = append(header, fingerprint...)
	if got, err := rdb.Get(ctx, rkey).Bytes(); err != nil || !bytes.Equal(got, header) {
		t.Fatalf("in-flight value = %q, %v; want %q", got, err, header)
	}
	if pttl := rdb.PTTL(ctx, rkey).Val(); pttl <= time.Second || pttl > 1500*time.Millisecond {
		t.Errorf("PTTL after a 1.5s lease = %v", pttl)
	}

	if err := st.Complete(ctx, key, c.Token, []byte("data"), 90*time.Second); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte{2, 'c'}, header[2:]...), "data"...)
	if got, err := rdb.Get(ctx, rkey).Bytes(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("completed value = %q, %v; want %q", got, err, want)
	}
	if pttl := rdb.PTTL(ctx, rkey).Val(); pttl <= 89*time.Second || pttl > 90*time.Second {
		t.Errorf("PTTL after a 90s retention = %v", pttl)
	}
}

// TestLayoutKept checks the kept entry of a claim with Keep: state 'k',
// Keep in milliseconds and the attempt count after the fingerprint, PX
// the lease plus Keep; Abandon leaves Keep as the PTTL; a take-over writes
// its token as the next attempt with the same Keep; a completion drops
// what follows the fingerprint, as an 'i' entry's.
func TestLayoutKept(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	key, fingerprint := newKey(t), fp()
	rkey := redisstore.DefaultPrefix + key
	kept := func(token string, attempt byte) []byte {
		v := append([]byte{2, 'k', 25}, token...)
		v = append(v, 0, byte(len(fingerprint)))
		v = append(v, fingerprint...)
		return append(v, 0, 0, 0, 0, 0, 0, 0x75, 0x30, 0, 0, 0, attempt) // 30000 ms, attempt
	}
	wantValue := func(what string, want []byte, minTTL, maxTTL time.Duration) {
		t.Helper()
		if got, err := rdb.Get(ctx, rkey).Bytes(); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s value = %q, %v; want %q", what, got, err, want)
		}
		if pttl := rdb.PTTL(ctx, rkey).Val(); pttl <= minTTL || pttl > maxTTL {
			t.Fatalf("%s PTTL = %v, want in (%v, %v]", what, pttl, minTTL, maxTTL)
		}
	}
	opts := store.ClaimOptions{Keep: 30 * time.Second, TakeOver: true}
	c, err := st.Claim(ctx, key, fingerprint, 1500*time.Millisecond, opts)
	if err != nil || !c.Won() || c.Attempt != 1 {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	wantValue("kept", kept(c.Token, 1), 31*time.Second, 31500*time.Millisecond)
	if err := st.Abandon(ctx, key, c.Token); err != nil {
		t.Fatal(err)
	}
	wantValue("abandoned", kept(c.Token, 1), 29*time.Second, 30*time.Second)

	old := c.Token
	c, err = st.Claim(ctx, key, fingerprint, 1500*time.Millisecond, store.ClaimOptions{Keep: time.Hour, TakeOver: true})
	if err != nil || !c.Won() || c.Attempt != 2 {
		t.Fatalf("take-over Claim = %+v, %v", c, err)
	}
	if at, _ := store.TokenTime(old); !c.Previous.Equal(at) {
		t.Errorf("Previous = %v, want the abandoned token's time %v", c.Previous, at)
	}
	wantValue("taken over (the entry's Keep, not the new claim's)", kept(c.Token, 2), 31*time.Second, 31500*time.Millisecond)

	if err := st.Complete(ctx, key, c.Token, []byte("data"), 90*time.Second); err != nil {
		t.Fatal(err)
	}
	header := kept(c.Token, 2)
	want := append(append([]byte{2, 'c'}, header[2:len(header)-12]...), "data"...)
	wantValue("completed", want, 89*time.Second, 90*time.Second)
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
	if c, err := a.Claim(ctx, key, fpA, longTTL, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("a.Claim = %+v, %v", c, err)
	}
	if c, err := b.Claim(ctx, key, fpB, longTTL, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("b.Claim of the same key under another prefix = %+v, %v; want a win", c, err)
	}
	for prefix, want := range map[string][]byte{"idempotency:": fpA, "tenant-b:": fpB} {
		v, err := rdb.Get(ctx, prefix+key).Result()
		e, _, derr := redisstore.DecodeValue(v)
		if err != nil || derr != nil || !bytes.Equal(e.Fingerprint, want) {
			t.Errorf("GET %s = fingerprint %x, %v, %v; want %x", prefix+key, e.Fingerprint, err, derr, want)
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
		if _, err := st.Claim(ctx, key, fp(), d, store.ClaimOptions{}); err == nil {
			t.Errorf("Claim with lease %v succeeded", d)
		}
	}
	c, err := st.Claim(ctx, key, fp(), longTTL, store.ClaimOptions{})
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

// TestFingerprintTooLong checks that a fingerprint the layout cannot hold
// is refused without touching Redis.
func TestFingerprintTooLong(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	st := redisstore.New(rdb)
	key := newKey(t)
	if _, err := st.Claim(t.Context(), key, make([]byte, 1<<16), longTTL, store.ClaimOptions{}); err == nil {
		t.Fatal("Claim with a 64 KiB fingerprint succeeded")
	}
	if n := rdb.Exists(t.Context(), redisstore.DefaultPrefix+key).Val(); n != 0 {
		t.Fatal("the refused claim wrote an entry")
	}
	if c, err := st.Claim(t.Context(), key, make([]byte, 1<<16-1), longTTL, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("Claim with a fingerprint of 65535 bytes = %+v, %v; want a win", c, err)
	}
}
