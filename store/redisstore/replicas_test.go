package redisstore_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// The WAIT timeouts of the replica tests: ample for a healthy link on a
// loaded machine, short where the link is stalled and a WAIT lasts all of
// it.
const (
	waitTimeout    = 2 * time.Second
	stalledTimeout = 200 * time.Millisecond
)

// replicated starts a master with one replica that replicates through a
// fault proxy, and returns the master, the replica and the proxy.
func replicated(t *testing.T) (master, replica *redistest.Server, link *faultproxy.Proxy) {
	t.Helper()
	s := redistest.StartSentinelWith(t, redistest.SentinelConfig{
		Replicas: 1,
		ReplicaLink: func(_ int, addr string) string {
			p, err := faultproxy.New(addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			link = p
			return p.Addr()
		},
	})
	return s.Master, s.Replicas[0], link
}

// TestMinReplicas checks WithMinReplicas on a master with one replica:
// a claim and a completion are one round trip each, the write and a WAIT
// in one pipeline, and once they return the replica holds them; a replay
// too is one round trip.
func TestMinReplicas(t *testing.T) {
	t.Parallel()
	master, replica, _ := replicated(t)
	rdb := master.Client()
	ctx := t.Context()
	st := redisstore.New(rdb, redisstore.WithMinReplicas(1, waitTimeout))
	if err := st.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	var rt redistest.RoundTrips
	rdb.AddHook(&rt)
	key, fingerprint := newKey(t), fp()
	rkey := redisstore.DefaultPrefix + key
	step := func(what string, want string) {
		t.Helper()
		if got := rt.Commands(); !slices.Equal(got, []string{want}) {
			t.Fatalf("%s sent %q, want one round trip %q", what, got, want)
		}
		rt.Reset()
	}
	c, err := st.Claim(ctx, key, fingerprint, longTTL, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	step("Claim", "pipeline(set,wait)")
	wantReplicated(t, master, replica, rkey)
	if err := st.Complete(ctx, key, c.Token, []byte("data"), longTTL); err != nil {
		t.Fatal(err)
	}
	step("Complete", "pipeline(evalsha,wait)")
	wantReplicated(t, master, replica, rkey)
	if c, err := st.Claim(ctx, key, fingerprint, longTTL, store.ClaimOptions{}); err != nil || c.Existing.State != store.StateCompleted {
		t.Fatalf("replay = %+v, %v", c, err)
	}
	step("replay", "pipeline(set,wait)")
}

// wantReplicated fails the test unless the replica holds the value the
// master holds under rkey.
func wantReplicated(t *testing.T, master, replica *redistest.Server, rkey string) {
	t.Helper()
	ctx := t.Context()
	want, err := master.Client().Get(ctx, rkey).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := replica.Client().Get(ctx, rkey).Result(); err != nil || got != want {
		t.Fatalf("the replica holds %q, %v; want the master's %q", got, err, want)
	}
}

// TestMinReplicasNotAcknowledged stalls the replication link: a new claim
// fails with ErrTooFewReplicas and is released; a completion fails the same
// way although the master completed the entry, and so does the same
// completion retried on another connection, one whose own last write the
// replica did acknowledge (a bare WAIT there would count that replica);
// once the link is back, the retry succeeds and the replica holds the
// completion.
func TestMinReplicasNotAcknowledged(t *testing.T) {
	t.Parallel()
	master, replica, link := replicated(t)
	rdb := master.Client()
	ctx := t.Context()
	st := redisstore.New(rdb, redisstore.WithMinReplicas(1, waitTimeout))
	granted, fingerprint := newKey(t), fp()
	c, err := st.Claim(ctx, granted, fingerprint, longTTL, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim before the stall = %+v, %v", c, err)
	}
	other := redis.NewClient(oneConn(master)) // its write is acknowledged
	t.Cleanup(func() { _ = other.Close() })
	if c, err := redisstore.New(other, redisstore.WithMinReplicas(1, waitTimeout)).Claim(ctx, newKey(t), fp(), longTTL, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("Claim on the other connection before the stall = %+v, %v", c, err)
	}

	link.Stall()
	st = redisstore.New(rdb, redisstore.WithMinReplicas(1, stalledTimeout))
	fresh := newKey(t)
	if c, err := st.Claim(ctx, fresh, fp(), longTTL, store.ClaimOptions{}); !errors.Is(err, redisstore.ErrTooFewReplicas) {
		t.Fatalf("Claim with the link stalled = %+v, %v; want ErrTooFewReplicas", c, err)
	}
	if n := rdb.Exists(ctx, redisstore.DefaultPrefix+fresh).Val(); n != 0 {
		t.Fatal("the unacknowledged claim was left behind, blocking its key")
	}
	if err := st.Complete(ctx, granted, c.Token, []byte("data"), longTTL); !errors.Is(err, redisstore.ErrTooFewReplicas) {
		t.Fatalf("Complete with the link stalled = %v, want ErrTooFewReplicas", err)
	}
	if got, err := st.Claim(ctx, granted, fingerprint, longTTL, store.ClaimOptions{}); err != nil || got.Existing.State != store.StateCompleted {
		t.Fatalf("the master does not hold the completion: %+v, %v", got, err)
	}
	retry := redisstore.New(other, redisstore.WithMinReplicas(1, stalledTimeout))
	if err := retry.Complete(ctx, granted, c.Token, []byte("data"), longTTL); !errors.Is(err, redisstore.ErrTooFewReplicas) {
		t.Fatalf("Complete retried on a fresh connection with the link stalled = %v, want ErrTooFewReplicas", err)
	}

	link.Resume()
	retry = redisstore.New(other, redisstore.WithMinReplicas(1, waitTimeout))
	if err := retry.Complete(ctx, granted, c.Token, []byte("data"), longTTL); err != nil {
		t.Fatalf("Complete retried once the link is back = %v, want nil", err)
	}
	wantReplicated(t, master, replica, redisstore.DefaultPrefix+granted)
}

// TestMinReplicasTakeOverNotAcknowledged stalls the replication link: a
// kept claim of a free key fails with ErrTooFewReplicas and is released,
// as without Keep; a take-over of an abandoned entry fails the same way,
// and is not deleted but abandoned again, so the next claim still finds
// the key abandoned (not free: an earlier attempt may have run), and a
// take-over once the link is back counts the failed one.
func TestMinReplicasTakeOverNotAcknowledged(t *testing.T) {
	t.Parallel()
	master, _, link := replicated(t)
	rdb := master.Client()
	ctx := t.Context()
	kept := store.ClaimOptions{Keep: longTTL, TakeOver: true}
	st := redisstore.New(rdb, redisstore.WithMinReplicas(1, waitTimeout))
	key, fingerprint := newKey(t), fp()
	c, err := st.Claim(ctx, key, fingerprint, longTTL, kept)
	if err != nil || !c.Won() {
		t.Fatalf("kept Claim before the stall = %+v, %v", c, err)
	}
	if err := st.Abandon(ctx, key, c.Token); err != nil {
		t.Fatal(err)
	}

	link.Stall()
	stalled := redisstore.New(rdb, redisstore.WithMinReplicas(1, stalledTimeout))
	fresh := newKey(t)
	if c, err := stalled.Claim(ctx, fresh, fp(), longTTL, kept); !errors.Is(err, redisstore.ErrTooFewReplicas) {
		t.Fatalf("kept Claim with the link stalled = %+v, %v; want ErrTooFewReplicas", c, err)
	}
	if n := rdb.Exists(ctx, redisstore.DefaultPrefix+fresh).Val(); n != 0 {
		t.Fatal("the unacknowledged kept claim was left behind, blocking its key")
	}
	if c, err := stalled.Claim(ctx, key, fingerprint, longTTL, kept); !errors.Is(err, redisstore.ErrTooFewReplicas) {
		t.Fatalf("take-over with the link stalled = %+v, %v; want ErrTooFewReplicas", c, err)
	}
	if got, err := st.Claim(ctx, key, []byte("probe"), longTTL, store.ClaimOptions{}); err != nil || got.Won() || got.Existing.State != store.StateAbandoned {
		t.Fatalf("Claim after the failed take-over = %+v, %v; want the entry abandoned", got, err)
	}

	link.Resume()
	if c, err := st.Claim(ctx, key, fingerprint, longTTL, kept); err != nil || !c.Won() || c.Attempt != 3 {
		t.Fatalf("take-over once the link is back = %+v, %v; want won as attempt 3", c, err)
	}
}

// TestMinReplicasResentClaim: a claim go-redis resent after losing the
// first reply finds its own token. The WAIT after the resend would speak
// for the resend's connection only, so the store extends the lease, a
// write, with a WAIT of its own: one more round trip. With the
// replication link stalled, that WAIT fails the resent claim, which is
// released.
func TestMinReplicasResentClaim(t *testing.T) {
	t.Parallel()
	master, replica, link := replicated(t)
	ctx := t.Context()
	key, fingerprint := newKey(t), fp()
	const token = "resent-claim-token-22c"
	first := redisstore.New(master.Client())
	if c, err := first.ClaimWithToken(ctx, key, token, fingerprint, longTTL); err != nil || c.Token != token {
		t.Fatalf("first send = %+v, %v", c, err)
	}
	rdb := master.Client()
	st := redisstore.New(rdb, redisstore.WithMinReplicas(1, waitTimeout))
	if err := st.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	var rt redistest.RoundTrips
	rdb.AddHook(&rt)
	if c, err := st.ClaimWithToken(ctx, key, token, fingerprint, longTTL); err != nil || c.Token != token {
		t.Fatalf("resend = %+v, %v; want won", c, err)
	}
	if got, want := rt.Commands(), []string{"pipeline(set,wait)", "pipeline(evalsha,wait)"}; !slices.Equal(got, want) {
		t.Fatalf("the resend sent %q, want %q", got, want)
	}
	wantReplicated(t, master, replica, redisstore.DefaultPrefix+key)

	conn := redis.NewClient(oneConn(master)) // the resend's, whose last write was acknowledged
	t.Cleanup(func() { _ = conn.Close() })
	if c, err := redisstore.New(conn, redisstore.WithMinReplicas(1, waitTimeout)).Claim(ctx, newKey(t), fp(), longTTL, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("Claim on the resend's connection = %+v, %v", c, err)
	}
	link.Stall()
	stalled := newKey(t)
	if c, err := first.ClaimWithToken(ctx, stalled, token, fingerprint, longTTL); err != nil || c.Token != token {
		t.Fatalf("first send with the link stalled = %+v, %v", c, err)
	}
	resend := redisstore.New(conn, redisstore.WithMinReplicas(1, stalledTimeout))
	if c, err := resend.ClaimWithToken(ctx, stalled, token, fingerprint, longTTL); !errors.Is(err, redisstore.ErrTooFewReplicas) {
		t.Fatalf("resend with the link stalled = %+v, %v; want ErrTooFewReplicas", c, err)
	}
	if n := rdb.Exists(ctx, redisstore.DefaultPrefix+stalled).Val(); n != 0 {
		t.Fatal("the unacknowledged resent claim was left behind")
	}
}

// oneConn returns client options that send everything, pipelines too, on
// one connection, so that a test knows which connection a WAIT runs on.
func oneConn(s *redistest.Server) *redis.Options {
	o := s.Options()
	o.PoolSize, o.PipelinePoolSize = 1, -1
	return o
}

// TestWithMinReplicasPanics checks the arguments New refuses.
func TestWithMinReplicasPanics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		n           int
		timeout     time.Duration
		readTimeout time.Duration
		panics      bool
	}{
		{"Off", 0, 0, 0, false},
		{"Valid", 1, time.Second, 0, false},
		{"NegativeReplicas", -1, time.Second, 0, true},
		{"ZeroTimeout", 1, 0, 0, true},
		{"NegativeTimeout", 1, -time.Second, 0, true},
		{"TimeoutAtDefaultReadTimeout", 1, 5 * time.Second, 0, true},
		{"TimeoutBelowDefaultReadTimeout", 1, 4 * time.Second, 0, false},
		{"TimeoutOverReadTimeout", 1, 2 * time.Second, time.Second, true},
		{"NoReadTimeout", 1, time.Minute, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: tc.readTimeout})
			defer rdb.Close()
			defer func() {
				if p := recover(); (p != nil) != tc.panics {
					t.Fatalf("New panicked with %v; want a panic: %v", p, tc.panics)
				}
			}()
			redisstore.New(rdb, redisstore.WithMinReplicas(tc.n, tc.timeout))
		})
	}
}
