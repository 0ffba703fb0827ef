package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// holdSets is a go-redis hook that holds the SET of a key given a gate
// until the gate opens: until then the command has not reached Redis, as
// if it were still on the wire. It reports each SET it holds on entered,
// and the first script run on a gated key (a release) on its gate.
type holdSets struct {
	mu      sync.Mutex
	gates   map[string]*gate
	entered chan string
}

// gate holds the SET of one key until open is closed; landed is closed
// once its round trip is over, scripted once a script on the key (EVALSHA
// or EVAL) has come back.
type gate struct {
	open, landed, scripted chan struct{}
	scriptOnce             sync.Once
}

func newHoldSets() *holdSets {
	return &holdSets{gates: map[string]*gate{}, entered: make(chan string, 16)}
}

// hold gives the SET of rkey a gate, closed until its open is closed.
func (h *holdSets) hold(rkey string) *gate {
	g := &gate{open: make(chan struct{}), landed: make(chan struct{}), scripted: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gates[rkey] = g
	return g
}

// gateOf returns the gate of the key cmd works on, if it has one, and
// whether cmd is its SET.
func (h *holdSets) gateOf(cmd redis.Cmder) (g *gate, rkey string, isSet bool) {
	args := cmd.Args()
	switch name := cmd.Name(); {
	case name == "set" && len(args) > 1:
		rkey, _ = args[1].(string)
		isSet = true
	case (name == "evalsha" || name == "eval") && len(args) > 3:
		rkey, _ = args[3].(string)
	default:
		return nil, "", false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gates[rkey], rkey, isSet
}

func (h *holdSets) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdSets) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		g, rkey, isSet := h.gateOf(cmd)
		switch {
		case g == nil:
			return next(ctx, cmd)
		case isSet:
			h.entered <- rkey
			<-g.open
			defer close(g.landed)
		default:
			defer g.scriptOnce.Do(func() { close(g.scripted) })
		}
		return next(ctx, cmd)
	}
}

func (h *holdSets) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			g, rkey, isSet := h.gateOf(cmd)
			switch {
			case g == nil:
			case isSet:
				h.entered <- rkey
				<-g.open
				defer close(g.landed)
			default:
				defer g.scriptOnce.Do(func() { close(g.scripted) })
			}
		}
		return next(ctx, cmds)
	}
}

// TestQueuedClaimSentThenCallerLeaves: claims hold every lane a batcher
// opens (their SETs held before they reach Redis), a further claim
// queues, and a batch sends it; its caller's context ends while its SET
// is on the wire. Claim returns the context's error at once, and releases
// the claim its SET may make only once that SET is back: the key is not
// left in flight with nobody owning it. (The release used to go out at
// once, on a free lane, and land first; the SET then held the key, owned
// by nobody, for the whole lease.)
func TestQueuedClaimSentThenCallerLeaves(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rdb := srv.Client()
	hold := newHoldSets()
	rdb.AddHook(hold)
	st := redisstore.New(rdb)
	if err := st.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	queued := make(chan string, 16)
	st.SetBatchHooks(func(rkey string) { queued <- rkey })
	ctx := t.Context()

	type result struct {
		c   store.ClaimResult
		err error
	}
	type claim struct {
		key    string
		gate   *gate
		cancel context.CancelFunc
		done   chan result
	}
	start := func() claim {
		key := newKey(t)
		cctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		c := claim{key: key, gate: hold.hold(redisstore.DefaultPrefix + key), cancel: cancel, done: make(chan result, 1)}
		go func() {
			r, err := st.Claim(cctx, key, fp(), longTTL, store.ClaimOptions{})
			c.done <- result{r, err}
		}()
		return c
	}
	won := func(c claim) {
		t.Helper()
		if r := <-c.done; r.err != nil || !r.c.Won() {
			t.Fatalf("Claim of a new key = %+v, %v; want it won", r.c, r.err)
		}
	}

	// Claims go out at once while a lane is free (two, and up to eight
	// once no batch has come back for a while), each held before Redis;
	// the first to find every lane busy queues.
	var leads []claim
	var victim claim
	for victim.done == nil {
		c := start()
		rkey := redisstore.DefaultPrefix + c.key
		select {
		case got := <-hold.entered:
			if got != rkey || len(leads) == redisstore.MaxLanes {
				t.Fatalf("%q went out with %d lanes busy, want the claim of %q with fewer than %d", got, len(leads), rkey, redisstore.MaxLanes)
			}
			leads = append(leads, c)
		case got := <-queued:
			if got != rkey {
				t.Fatalf("%q queued, want the claim of %q", got, rkey)
			}
			victim = c
		}
	}
	t.Logf("%d claims on the wire, one queued", len(leads))

	// The first lead's return sends the queue, the victim alone, from a
	// goroutine that keeps its lane; the others' returns free their lanes.
	close(leads[0].gate.open)
	won(leads[0])
	if rkey := <-hold.entered; rkey != redisstore.DefaultPrefix+victim.key {
		t.Fatalf("sent %q, want the queued claim", rkey)
	}
	for _, c := range leads[1:] {
		close(c.gate.open)
		won(c)
	}

	// The victim's caller leaves while its SET is on the wire, with a lane
	// free for anything it sends next.
	victim.cancel()
	if r := <-victim.done; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Claim whose caller left after it was sent = %+v, %v; want context.Canceled", r.c, r.err)
	}
	var early bool
	select {
	case <-victim.gate.scripted:
		early = true
	default:
	}
	close(victim.gate.open) // the SET lands
	<-victim.gate.landed
	if early {
		c, err := redisstore.New(srv.Client()).Claim(ctx, victim.key, fp(), longTTL, store.ClaimOptions{})
		t.Fatalf("the claim was released before its SET landed, which left the key in flight, owned by nobody: a new claim = %+v, %v", c, err)
	}
	<-victim.gate.scripted // the release, after the SET
	if n := srv.Client().Exists(ctx, redisstore.DefaultPrefix+victim.key).Val(); n != 0 {
		t.Fatal("the key stayed in flight, owned by nobody, after Claim returned the context's error")
	}
}

// TestResentClaimCallerLeaves: a claim that finds its own token (go-redis
// resent it after losing the first reply) may need one more round trip:
// with WithMinReplicas it extends its lease with a WAIT of its own, and on
// a Redis out of memory, which refuses the SET, a GET reads the key. When
// its caller's context ends while that command is still queued, the
// command is never sent; the claim is there all the same, so Claim
// releases it before returning the context's error: the key is free, not
// in flight for a whole lease with nobody owning it.
func TestResentClaimCallerLeaves(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string                                       // redis-server's
		opts []redisstore.Option                            // the store's
		fill func(ctx context.Context, s *redistest.Server) // after the first send
	}{
		{
			name: "extension with WithMinReplicas",
			// No replica: every WAIT counts none, after its timeout.
			opts: []redisstore.Option{redisstore.WithMinReplicas(1, 10*time.Millisecond)},
		},
		{
			name: "read after OOM",
			args: []string{"--maxmemory", "4mb", "--maxmemory-policy", "noeviction"},
			fill: func(ctx context.Context, s *redistest.Server) { s.FillMemory(ctx, "fill:") },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t, tc.args...)
			ctx := t.Context()
			key, token, fingerprint := newKey(t), "resent-claim-token", fp()
			rkey := redisstore.DefaultPrefix + key
			// The first send landed: the key is in flight under the
			// claim's token.
			first := redisstore.New(srv.Client())
			if err := first.LoadScripts(ctx); err != nil {
				t.Fatal(err)
			}
			if c, err := first.ClaimWithToken(ctx, key, token, fingerprint, longTTL); err != nil || c.Token != token {
				t.Fatalf("first send = %+v, %v", c, err)
			}
			if tc.fill != nil {
				tc.fill(ctx, srv)
			}

			rdb := srv.Client()
			hold := newHoldSets()
			rdb.AddHook(hold)
			st := redisstore.New(rdb, tc.opts...)
			queued := make(chan string, 16)
			st.SetBatchHooks(func(rkey string) { queued <- rkey })

			// The resend and two claims of other keys go out at once, each
			// on a lane of its own, held before Redis; then the batcher
			// keeps to its two lanes, both taken once the resend is back.
			st.SetStallAfter(-1)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			resend := hold.hold(rkey)
			done := make(chan error, 1)
			go func() {
				c, err := st.ClaimWithToken(cctx, key, token, fingerprint, longTTL)
				if err == nil {
					err = fmt.Errorf("resent claim whose caller left = %+v, want the context's error", c)
				}
				done <- err
			}()
			if got := <-hold.entered; got != rkey {
				t.Fatalf("held %q, want the resend", got)
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			var others []*gate
			for range 2 {
				k := newKey(t)
				others = append(others, hold.hold(redisstore.DefaultPrefix+k))
				wg.Go(func() { _, _ = st.Claim(ctx, k, fp(), longTTL, store.ClaimOptions{}) }) // fails: no replica, or no memory
				if got := <-hold.entered; got != redisstore.DefaultPrefix+k {
					t.Fatalf("held %q, want the claim of %q", got, k)
				}
			}
			st.SetStallAfter(math.MaxInt64)

			// The resend finds its own token, or OOM; its next command
			// queues, and its caller leaves.
			close(resend.open)
			if got := <-queued; got != rkey {
				t.Fatalf("queued %q, want the resend's next command", got)
			}
			cancel()
			// The command is dropped, unsent, and Claim returns, or first
			// queues the release of its claim: only then do the other
			// claims come back and free a lane.
			var err error
			select {
			case err = <-done:
			case got := <-queued:
				if got != rkey {
					t.Fatalf("queued %q, want the release of the resend's claim", got)
				}
			}
			for _, g := range others {
				close(g.open)
			}
			if err == nil {
				err = <-done
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("resent claim whose caller left = %v, want context.Canceled", err)
			}
			if n := srv.Client().Exists(ctx, rkey).Val(); n != 0 {
				v, _ := srv.Client().Get(ctx, rkey).Result()
				e, owner, _ := redisstore.DecodeValue(v)
				t.Fatalf("Claim returned the context's error and left the key %s under %q, owned by nobody", e.State, owner)
			}
		})
	}
}
