package redisstore_test

import (
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestRoundTrips checks that each operation is exactly one round trip once
// the scripts are loaded, on a single node and on a Cluster.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]func(t *testing.T) redis.UniversalClient{
		"Standalone": func(t *testing.T) redis.UniversalClient { return redistest.StartServer(t).Client() },
		"Cluster":    func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t).Client() },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdb := start(t)
			ctx := t.Context()
			st := redisstore.New(rdb)
			if err := st.LoadScripts(ctx); err != nil {
				t.Fatal(err)
			}
			var rt redistest.RoundTrips
			if err := rt.Attach(ctx, rdb); err != nil {
				t.Fatal(err)
			}
			key, fingerprint := newKey(t), fp()
			step := func(op string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", op, err)
				}
				if rt.Count() != 1 {
					t.Fatalf("%s took %d round trips %q, want 1", op, rt.Count(), rt.Commands())
				}
				rt.Reset()
			}
			c, err := st.Claim(ctx, key, fingerprint, longTTL, store.ClaimOptions{})
			step("Claim", err)
			step("Extend", st.Extend(ctx, key, c.Token, longTTL))
			step("Complete", st.Complete(ctx, key, c.Token, []byte("x"), longTTL))
			_, err = st.Claim(ctx, key, fingerprint, longTTL, store.ClaimOptions{})
			step("Claim of a completed key (replay)", err)
			other := newKey(t) + "-other"
			c, err = st.Claim(ctx, other, fingerprint, longTTL, store.ClaimOptions{})
			step("Claim", err)
			step("Release", st.Release(ctx, other, c.Token))
		})
	}
}

// TestRoundTripsWithoutLoadScripts shows the cost of skipping LoadScripts:
// a claim is a native SET and needs no script; the first run of a script
// on a node is EVALSHA, answered NOSCRIPT, then EVAL; every later run is
// one EVALSHA.
func TestRoundTripsWithoutLoadScripts(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var rt redistest.RoundTrips
	rdb.AddHook(&rt)
	st := redisstore.New(rdb)
	for _, step := range []struct {
		name string
		want []string
	}{
		{"first Complete", []string{"set", "evalsha", "eval"}},
		{"second Complete", []string{"set", "evalsha"}},
	} {
		key := newKey(t)
		c, err := st.Claim(ctx, key, fp(), longTTL, store.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Complete(ctx, key, c.Token, []byte("x"), longTTL); err != nil {
			t.Fatal(err)
		}
		if got := rt.Commands(); !slices.Equal(got, step.want) {
			t.Fatalf("claim and %s: %q, want %q", step.name, got, step.want)
		}
		rt.Reset()
	}
}

// TestRoundTripsKept checks the round trips of claims with Keep once the
// scripts are loaded, on a single node and on a Cluster: a kept claim of
// a free key (the executed path) and a replay of a completed entry are
// one round trip each, the native SET, as without Keep; a claim that
// finds a kept entry in flight or abandoned, a take-over, an Extend and
// an Abandon of a kept entry are one more script at most.
func TestRoundTripsKept(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]func(t *testing.T) redis.UniversalClient{
		"Standalone": func(t *testing.T) redis.UniversalClient { return redistest.StartServer(t).Client() },
		"Cluster":    func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t).Client() },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdb := start(t)
			ctx := t.Context()
			st := redisstore.New(rdb)
			if err := st.LoadScripts(ctx); err != nil {
				t.Fatal(err)
			}
			var rt redistest.RoundTrips
			if err := rt.Attach(ctx, rdb); err != nil {
				t.Fatal(err)
			}
			step := func(op string, err error, want ...string) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", op, err)
				}
				if got := rt.Commands(); rt.Count() != len(want) || !slices.Equal(got, want) {
					t.Fatalf("%s took %d round trips %q, want %q", op, rt.Count(), got, want)
				}
				rt.Reset()
			}
			kept := store.ClaimOptions{Keep: longTTL, TakeOver: true}
			key, fingerprint := newKey(t), fp()
			c, err := st.Claim(ctx, key, fingerprint, longTTL, kept)
			step("kept Claim of a free key", err, "set")
			if !c.Won() || c.Attempt != 1 {
				t.Fatalf("kept Claim of a free key = %+v, want won as attempt 1", c)
			}
			d, err := st.Claim(ctx, key, fingerprint, longTTL, kept)
			step("Claim of a kept entry in flight", err, "set", "evalsha")
			if d.Won() || d.Existing.State != store.StateInFlight {
				t.Fatalf("Claim of a kept entry in flight = %+v, want the in-flight entry", d)
			}
			step("Extend of a kept entry", st.Extend(ctx, key, c.Token, longTTL), "evalsha")
			step("Abandon of a kept entry", st.Abandon(ctx, key, c.Token), "evalsha")
			c, err = st.Claim(ctx, key, fingerprint, longTTL, kept)
			step("take-over Claim of an abandoned entry", err, "set", "evalsha")
			if !c.Won() || c.Attempt != 2 {
				t.Fatalf("take-over Claim = %+v, want won as attempt 2", c)
			}
			step("Complete of a kept entry", st.Complete(ctx, key, c.Token, []byte("x"), longTTL), "evalsha")
			r, err := st.Claim(ctx, key, fingerprint, longTTL, kept)
			step("kept Claim of a completed key (replay)", err, "set")
			if r.Won() || r.Existing.State != store.StateCompleted || string(r.Existing.Data) != "x" {
				t.Fatalf("replay = %+v, want the completed entry", r)
			}
		})
	}
}
