package redisstore_test

import (
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/test/redistest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
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
