package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// slowRedis returns a client that reaches a fresh Redis through a proxy
// adding latency each way, with a round-trip counter attached, and the
// client's direct twin for checks.
func slowRedis(t *testing.T, latency time.Duration) (rdb, direct *redis.Client, rt *redistest.RoundTrips) {
	t.Helper()
	srv := redistest.StartServer(t)
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	p.SetLatency(latency)
	rdb = redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	rt = &redistest.RoundTrips{}
	rdb.AddHook(rt)
	return rdb, srv.Client(), rt
}

// TestSharedRoundTrips: 64 claims started together over a link with some
// latency share round trips (a few pipelines carry them all) and each goes
// out once; without pipelining each is a round trip of its own.
func TestSharedRoundTrips(t *testing.T) {
	t.Parallel()
	const callers = 64
	for _, tc := range []struct {
		name   string
		opts   []redisstore.Option
		shared bool
	}{
		{"Pipelining", nil, true},
		{"WithoutPipelining", []redisstore.Option{redisstore.WithoutPipelining()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb, _, rt := slowRedis(t, 20*time.Millisecond)
			st := redisstore.New(rdb, tc.opts...)
			var wg sync.WaitGroup
			errs := make(chan error, callers)
			for range callers {
				wg.Go(func() {
					c, err := st.Claim(t.Context(), newKey(t), fp(), longTTL, store.ClaimOptions{})
					if err == nil && !c.Won() {
						err = errors.New("a claim of a new key did not win")
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := rt.CommandCount(); got != callers {
				t.Fatalf("%d commands went out for %d claims, want one each: %q", got, callers, rt.Commands())
			}
			trips := rt.Count()
			t.Logf("%d claims in %d round trips", callers, trips)
			if tc.shared && trips > callers/4 {
				t.Fatalf("%d claims took %d round trips, want them shared: %q", callers, trips, rt.Commands())
			}
			if !tc.shared && trips != callers {
				t.Fatalf("%d claims took %d round trips without pipelining, want one each", callers, trips)
			}
		})
	}
}

// TestQueuedCallerLeaves: a claim queued behind batches on the wire whose
// caller's context ends gets its context's error at once, and its command
// is never sent.
func TestQueuedCallerLeaves(t *testing.T) {
	t.Parallel()
	rdb, direct, rt := slowRedis(t, 150*time.Millisecond)
	st := redisstore.New(rdb)
	var wg sync.WaitGroup
	defer wg.Wait()
	claim := func() {
		wg.Go(func() {
			if _, err := st.Claim(t.Context(), newKey(t), fp(), longTTL, store.ClaimOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	// Every lane is taken: the first claims open the lanes a batcher
	// keeps, and the later ones, finding the first stalled (no batch back
	// for a while), open the lanes it keeps at most.
	claim()
	time.Sleep(20 * time.Millisecond)
	for range redisstore.MaxLanes - 1 {
		claim()
		time.Sleep(10 * time.Millisecond)
	}
	key := newKey(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if c, err := st.Claim(ctx, key, fp(), longTTL, store.ClaimOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued Claim whose deadline passed = %+v, %v; want context.DeadlineExceeded", c, err)
	}
	wg.Wait()
	if n := direct.Exists(t.Context(), redisstore.DefaultPrefix+key).Val(); n != 0 {
		t.Fatal("the claim of the caller that left reached Redis")
	}
	if got := rt.CommandCount(); got != redisstore.MaxLanes {
		t.Fatalf("%d commands went out, want the %d claims that waited and nothing for the one that left: %q", got, redisstore.MaxLanes, rt.Commands())
	}
}

// TestSharedRoundTripsNoScript: completions queued into one pipeline on a
// node that has lost its scripts (SCRIPT FLUSH, as after a restart) are
// answered NOSCRIPT inside that pipeline, sent again with EVAL, and all
// land: every key then replays as completed. Claims (native commands, no
// script) hold every lane while the completions queue, so the first
// script to reach Redis is inside a pipeline.
func TestSharedRoundTripsNoScript(t *testing.T) {
	t.Parallel()
	const callers = 32
	rdb, direct, rt := slowRedis(t, 150*time.Millisecond)
	st := redisstore.New(rdb)
	ctx := t.Context()
	type claimed struct {
		key, token  string
		fingerprint []byte
	}
	claims := make([]claimed, callers)
	var wg sync.WaitGroup
	for i := range claims {
		wg.Go(func() {
			key, fingerprint := newKey(t), fp()
			c, err := st.Claim(ctx, key, fingerprint, longTTL, store.ClaimOptions{})
			if err != nil || !c.Won() {
				t.Errorf("Claim = %+v, %v", c, err)
			}
			claims[i] = claimed{key, c.Token, fingerprint}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if err := direct.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rt.Reset()
	// Every lane is taken by a claim, as in TestQueuedCallerLeaves, so that
	// every completion queues.
	for i := range redisstore.MaxLanes {
		wg.Go(func() {
			if _, err := st.Claim(ctx, newKey(t), fp(), longTTL, store.ClaimOptions{}); err != nil {
				t.Error(err)
			}
		})
		time.Sleep(time.Duration(min(i+1, 2)) * 10 * time.Millisecond)
	}
	errs := make(chan error, callers)
	for _, c := range claims {
		wg.Go(func() { errs <- st.Complete(ctx, c.key, c.token, []byte("done "+c.key), longTTL) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Complete after SCRIPT FLUSH: %v", err)
		}
	}
	commands := rt.Commands()
	t.Logf("%d completions after SCRIPT FLUSH, round trips: %q", callers, commands)
	var noscript, resent bool
	for _, c := range commands {
		if inner, ok := strings.CutPrefix(c, "pipeline("); ok {
			names := strings.Split(strings.TrimSuffix(inner, ")"), ",")
			noscript = noscript || slices.Contains(names, "evalsha") && len(names) > 1
			resent = resent || slices.Contains(names, "eval") && len(names) > 1
		}
	}
	if !noscript || !resent {
		t.Fatalf("want a pipeline of EVALSHA answered NOSCRIPT and a pipeline of EVAL resending them: %q", commands)
	}
	if n := rt.Count(); n > redisstore.MaxLanes+4 {
		t.Fatalf("%d round trips for %d completions and %d claims, want the completions' shared: %q", n, callers, redisstore.MaxLanes, commands)
	}
	check := redisstore.New(direct) // no latency
	for _, c := range claims {
		got, err := check.Claim(ctx, c.key, c.fingerprint, longTTL, store.ClaimOptions{})
		if err != nil || got.Won() || got.Existing.State != store.StateCompleted || string(got.Existing.Data) != "done "+c.key {
			t.Fatalf("Claim of %s after its completion = %+v, %v; want it completed with its data", c.key, got, err)
		}
	}
}
