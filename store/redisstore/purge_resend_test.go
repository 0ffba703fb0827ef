package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/test/wait"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// replyCutter is a redis.Hook on the connections of a client: once armed,
// the next command whose bytes hold marker reaches Redis and runs; the
// connection waits for the first byte of its reply (so the command has
// run), calls between, and then breaks before go-redis reads any of the
// reply. go-redis takes it for a broken connection and resends the
// command on another one (MaxRetries).
type replyCutter struct {
	marker []byte

	mu      sync.Mutex
	between func() // armed when set; called once

	sends atomic.Int32 // writes that carried marker
	cuts  atomic.Int32
}

// arm cuts the reply of the next command that carries the marker, calling
// between once it ran.
func (h *replyCutter) arm(between func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.between = between
}

func (h *replyCutter) take() func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.between
	h.between = nil
	return f
}

func (h *replyCutter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &cutConn{Conn: c, h: h}, nil
	}
}

func (h *replyCutter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *replyCutter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// cutConn is a connection of a client with a replyCutter.
type cutConn struct {
	net.Conn
	h       *replyCutter
	between func() // set once the marked command is written: cut its reply
}

func (c *cutConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, c.h.marker) {
		c.h.sends.Add(1)
		c.between = c.h.take()
	}
	return c.Conn.Write(b)
}

func (c *cutConn) Read(b []byte) (int, error) {
	between := c.between
	if between == nil {
		return c.Conn.Read(b)
	}
	c.between = nil
	// The first byte of the reply: the command ran in Redis.
	if _, err := io.ReadFull(c.Conn, make([]byte, 1)); err != nil {
		return 0, err
	}
	between()
	c.h.cuts.Add(1)
	_ = c.Conn.Close()
	return 0, io.EOF
}

// TestPurgeResentAfterReplyLost: a Purge whose first send ran in Redis
// (and purged the entry) while its reply was lost is resent by go-redis;
// before the resend, another client claims the key anew. The resend must
// leave the new claim alone: deleting it would let a retry run a handler
// that is running, or run again one that completed. The resend reports
// the purge its first send made. Redis runs the purge script twice here
// (the hook sees both sends).
func TestPurgeResentAfterReplyLost(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	cutter := &replyCutter{marker: []byte(redisstore.PurgeScriptSHA)}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()}) // go-redis resends: MaxRetries 3
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(cutter)
	purger := redisstore.New(rdb)
	other := redisstore.New(rs.Client())
	if err := purger.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		// first makes the entry to purge, and returns its token.
		first func(t *testing.T, key string) string
		opts  func(token string) store.PurgeOptions
		// next claims the key anew once the purge ran, and returns its
		// token and the state it leaves the key in.
		next  func(t *testing.T, key string) (string, store.State)
		state store.State // of the entry purged
	}{
		{
			name:  "InFlightThenARunningClaim",
			first: claimKey(other),
			opts:  func(string) store.PurgeOptions { return store.PurgeOptions{InFlight: true} },
			next: func(t *testing.T, key string) (string, store.State) {
				return claimKey(other)(t, key), store.StateInFlight
			},
			state: store.StateInFlight,
		},
		{
			name:  "CompletedThenACompletedClaim",
			first: completeKeyToken(other, "first"),
			opts:  func(string) store.PurgeOptions { return store.PurgeOptions{} },
			next: func(t *testing.T, key string) (string, store.State) {
				return completeKeyToken(other, "next")(t, key), store.StateCompleted
			},
			state: store.StateCompleted,
		},
		{
			name:  "FencedByTokenThenACompletedClaim",
			first: completeKeyToken(other, "first"),
			opts:  func(token string) store.PurgeOptions { return store.PurgeOptions{Token: token} },
			next: func(t *testing.T, key string) (string, store.State) {
				return completeKeyToken(other, "next")(t, key), store.StateCompleted
			},
			state: store.StateCompleted,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One case at a time: the cutter is the client's.
			key := newKey(t)
			firstToken := tc.first(t, key)
			var nextToken string
			var nextState store.State
			ran := false
			cutter.arm(func() {
				ran = true
				nextToken, nextState = tc.next(t, key)
			})
			sendsBefore := cutter.sends.Load()
			info, err := purger.Purge(t.Context(), key, tc.opts(firstToken))
			if !ran {
				t.Fatalf("the purge's reply was never cut (Purge = %+v, %v)", info, err)
			}
			if sends := cutter.sends.Load() - sendsBefore; sends < 2 {
				t.Fatalf("the purge script went out %d times, want a resend", sends)
			}
			got, lerr := other.Lookup(t.Context(), key)
			if lerr != nil || got.Token != nextToken || got.State != nextState {
				t.Fatalf("after the resent purge, Lookup = %+v, %v; want the new claim %s (%v) untouched", got, lerr, nextToken, nextState)
			}
			if err != nil || info.Token != firstToken || info.State != tc.state {
				t.Fatalf("resent Purge = %+v, %v; want the entry its first send purged, %s (%v)", info, err, firstToken, tc.state)
			}
			if nextState == store.StateInFlight {
				if err := other.Complete(t.Context(), key, nextToken, []byte("done"), longTTL); err != nil {
					t.Fatalf("the new claim's Complete after the resent purge = %v, want nil", err)
				}
			}
		})
	}
}

// claimKey returns a func that claims a free key in st and returns the
// claim's token.
func claimKey(st *redisstore.Store) func(t *testing.T, key string) string {
	return func(t *testing.T, key string) string {
		t.Helper()
		c, err := st.Claim(context.Background(), key, fp(), longTTL, store.ClaimOptions{})
		if err != nil || !c.Won() {
			t.Errorf("Claim(%q) = %+v, %v; want won", key, c, err)
		}
		return c.Token
	}
}

// completeKeyToken returns a func that claims a free key in st, completes
// it with data and returns the claim's token.
func completeKeyToken(st *redisstore.Store, data string) func(t *testing.T, key string) string {
	return func(t *testing.T, key string) string {
		t.Helper()
		token := claimKey(st)(t, key)
		if err := st.Complete(context.Background(), key, token, []byte(data), longTTL); err != nil {
			t.Errorf("Complete(%q) = %v", key, err)
		}
		return token
	}
}

// marks returns the keys of the purge marks in rdb.
func marks(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "*:purge:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestPurgeResentAfterItsMarkExpired: as TestPurgeResentAfterReplyLost,
// but the resend runs once the first send's mark has expired, so it
// cannot tell its own purge from another's. It deletes nothing, and Purge
// reports its outcome as unknown (neither purged nor refused) rather than
// purging the new claim in its turn.
func TestPurgeResentAfterItsMarkExpired(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	cutter := &replyCutter{marker: []byte(redisstore.PurgeScriptSHA)}
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(cutter)
	purger := redisstore.New(rdb)
	purger.SetPurgeMarkTTL(50 * time.Millisecond)
	check := rs.Client()
	other := redisstore.New(check)
	if err := purger.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	completeKeyToken(other, "first")(t, key)
	var next string
	cutter.arm(func() {
		if len(marks(t, check)) != 1 {
			t.Errorf("marks after the purge's first send = %q, want one", marks(t, check))
		}
		next = completeKeyToken(other, "next")(t, key)
		wait.For(t, func() bool { return len(marks(t, check)) == 0 })
	})
	info, err := purger.Purge(t.Context(), key, store.PurgeOptions{})
	if cutter.cuts.Load() != 1 {
		t.Fatalf("the purge's reply was never cut (Purge = %+v, %v)", info, err)
	}
	if err == nil || errors.Is(err, store.ErrChanged) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInFlight) {
		t.Errorf("Purge resent after its mark expired = %+v, %v; want an unknown outcome", info, err)
	}
	got, lerr := other.Lookup(t.Context(), key)
	if lerr != nil || got.Token != next {
		t.Fatalf("after the resent purge, Lookup = %+v, %v; want the new claim %s untouched", got, lerr, next)
	}
}

// TestPurgeMarkInKeySlot: a purge's mark is in its key's hash slot, for
// keys and prefixes with and without hash tags of their own, so that the
// purge script may touch both on a Cluster (which refuses a script whose
// keys are in two slots with CROSSSLOT), and under the store's prefix,
// which an ACL may limit the store's user to.
func TestPurgeMarkInKeySlot(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t)
	ctx := t.Context()
	rdb := cluster.Client()
	for _, prefix := range []string{redisstore.DefaultPrefix, "{idem}:", "", "}", "a{b:", "{}:"} {
		st := redisstore.New(rdb, redisstore.WithPrefix(prefix))
		for _, key := range []string{"plain", "a{b}c", "x}y", "{}z", "{open", "}", "{", "{}", "a{}b{c}"} {
			rkey := prefix + key
			want := rdb.ClusterKeySlot(ctx, rkey).Val()
			mark := redisstore.MarkKey(prefix, rkey, "nonce")
			if !strings.HasPrefix(mark, prefix) {
				t.Errorf("mark %q of key %q is not under the store's prefix %q", mark, rkey, prefix)
			}
			if got := rdb.ClusterKeySlot(ctx, mark).Val(); got != want {
				t.Errorf("slot of mark %q = %d, of key %q = %d", mark, got, rkey, want)
			}
			token := completeKeyToken(st, "data")(t, key)
			if info, err := st.Purge(ctx, key, store.PurgeOptions{}); err != nil || info.Token != token {
				t.Errorf("Purge(%q) = %+v, %v; want %s purged", rkey, info, err, token)
			}
		}
	}
}
