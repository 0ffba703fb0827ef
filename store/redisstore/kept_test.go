package redisstore_test

import (
	"math"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestInspectKept checks how the inspector shows kept entries: in flight,
// one Expires at the end of its lease; abandoned, at the end of its Keep;
// each with its attempt count, and counted by Stats in its state with the
// bytes Lookup gives it.
func TestInspectKept(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	opts := store.ClaimOptions{Keep: time.Hour, TakeOver: true}
	near := func(what string, got, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < -5*time.Second || d > 5*time.Second {
			t.Errorf("%s = %v, want about %v", what, got, want)
		}
	}
	live, fingerprint := newKey(t), fp()
	c, err := st.Claim(ctx, live, fingerprint, time.Minute, opts)
	if err != nil || !c.Won() {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	in, err := st.Lookup(ctx, live)
	if err != nil || in.State != store.StateInFlight || in.Attempt != 1 || in.Token != c.Token {
		t.Fatalf("Lookup of a kept claim = %+v, %v; want in flight, attempt 1, its token", in, err)
	}
	near("Expires of a kept claim in flight", in.Expires, time.Now().Add(time.Minute))

	gone := newKey(t)
	c, err = st.Claim(ctx, gone, fingerprint, time.Minute, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Abandon(ctx, gone, c.Token); err != nil {
		t.Fatal(err)
	}
	if c, err = st.Claim(ctx, gone, fingerprint, time.Minute, opts); err != nil || c.Attempt != 2 {
		t.Fatalf("take-over = %+v, %v", c, err)
	}
	if err := st.Abandon(ctx, gone, c.Token); err != nil {
		t.Fatal(err)
	}
	ab, err := st.Lookup(ctx, gone)
	if err != nil || ab.State != store.StateAbandoned || ab.Attempt != 2 || ab.Token != c.Token {
		t.Fatalf("Lookup of an abandoned entry = %+v, %v; want abandoned, attempt 2, the owner token", ab, err)
	}
	near("Expires of an abandoned entry", ab.Expires, time.Now().Add(time.Hour))

	page, err := st.List(ctx, store.ListOptions{State: store.StateAbandoned})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Key != gone || page.Entries[0].Attempt != 2 || page.Entries[0].Expires != ab.Expires {
		t.Fatalf("List of abandoned entries = %+v, %v; want %q alone, as Lookup shows it", page, err, gone)
	}
	want := store.Stats{
		InFlight:  store.Count{Entries: 1, Bytes: in.Size},
		Abandoned: store.Count{Entries: 1, Bytes: ab.Size},
	}
	if got, err := st.Stats(ctx); err != nil || got != want {
		t.Fatalf("Stats = %+v, %v; want %+v", got, err, want)
	}
}

// TestKeptSaturates: a lease and a Keep of math.MaxInt64 each are taken,
// their sum too (as PX, and as PEXPIRE on Extend and a take-over), and the
// entry is in flight, not abandoned.
func TestKeptSaturates(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	key, fingerprint := newKey(t), fp()
	opts := store.ClaimOptions{Keep: math.MaxInt64, TakeOver: true}
	c, err := st.Claim(ctx, key, fingerprint, math.MaxInt64, opts)
	if err != nil || !c.Won() {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	if err := st.Extend(ctx, key, c.Token, math.MaxInt64); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if got, err := st.Claim(ctx, key, []byte("probe"), time.Minute, store.ClaimOptions{}); err != nil || got.Existing.State != store.StateInFlight {
		t.Fatalf("Claim of the kept entry = %+v, %v; want it in flight", got, err)
	}
	if err := st.Abandon(ctx, key, c.Token); err != nil {
		t.Fatal(err)
	}
	if c, err = st.Claim(ctx, key, fingerprint, math.MaxInt64, opts); err != nil || c.Attempt != 2 {
		t.Fatalf("take-over = %+v, %v", c, err)
	}
	pttl, err := rdb.Do(ctx, "pttl", redisstore.DefaultPrefix+key).Int64() // in ms, over a Duration's range
	if want := 2 * int64(math.MaxInt64/time.Millisecond); err != nil || pttl < want-60_000 {
		t.Fatalf("PTTL after the take-over = %d ms, %v; want about %d", pttl, err, want)
	}
}
