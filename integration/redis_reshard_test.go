package idempotency_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// Shape of the resharding soak: reshardCalls calls from reshardCallers
// goroutines, reshardPerKey calls per key, while the slot of each key
// moves from master to master as its calls start.
const (
	reshardCalls   = 2000
	reshardPerKey  = 4
	reshardKeys    = reshardCalls / reshardPerKey
	reshardCallers = 32
	// reshardPause holds each step of a migration open, so calls meet
	// slots half moved (ASK) and moved (MOVED).
	reshardPause = 3 * time.Millisecond
)

// TestRedisReshard: keys execute once while Redis Cluster reshards. Two
// server instances, each with its own store on its own cluster client,
// serve 2,000 calls (four per key, so each key executes once, and its other
// calls wait for it or replay it) made by 32 goroutines through the client
// interceptor (with retries) to a random instance per attempt. Keys are
// called in order, and the calls of a key start once its slot is marked for
// migration to the first master (as when a cluster moves slots to a new
// node), which then moves it the way redis-cli --cluster reshard does
// (CLUSTER SETSLOT IMPORTING and MIGRATING, MIGRATE of its keys, CLUSTER
// SETSLOT NODE), each step held open 3 ms: the calls meet the slot half
// moved and moved, and a completion may find its claim moved since. The
// keys whose slot is on the first master already are called as they come.
//
// It proves: the store's requests (the claims' SET and the scripts'
// EVALSHA, alone and in pipelines) follow MOVED and ASK (the nodes sent
// both, counted on the node clients); no key runs twice; every call ends
// with its own answer, the client's retries mending what a retry mends
// (a call never gets an error a retry would not have fixed); and after the
// soak every key replays.
func TestRedisReshard(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	cluster := redistest.StartCluster(t)
	var redirects redistest.Redirects
	keys := newKeyLedger()
	var storeKeyMismatch atomic.Value
	handler := func(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		key := metadata.ValueFromIncomingContext(ctx, idempotency.MetadataKey)
		c, ok := idempotency.ClaimFromContext(ctx)
		if len(key) != 1 || !ok {
			return nil, status.Error(codes.Internal, "soak: call without exactly one key or claim")
		}
		if want := testStoreKey(method, key[0]); c.StoreKey != want {
			storeKeyMismatch.CompareAndSwap(nil, fmt.Sprintf("store key %q, computed %q", c.StoreKey, want))
		}
		n := keys.execute(key[0])
		// Some work, during which the key's slot may move under its claim:
		// the completion then meets ASK or MOVED.
		time.Sleep(time.Duration(rand.IntN(int(2 * reshardPause))))
		return &testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount(), Execution: n}, nil
	}
	var conns [2]*grpc.ClientConn
	var first *testserver.Server
	for i := range conns {
		rdb := cluster.Client()
		if err := redirects.Attach(ctx, rdb); err != nil {
			t.Fatal(err)
		}
		st := redisstore.New(rdb)
		if err := st.LoadScripts(ctx); err != nil {
			t.Fatal(err)
		}
		srv := testserver.New(t, &testserver.Service{Handler: handler}, grpc.ChainUnaryInterceptor(
			idempotency.UnaryServerInterceptor(st, idempotency.WithRetryAfter(20*time.Millisecond))))
		conns[i] = srv.Dial(t)
		if first == nil {
			first = srv
		}
	}
	spread := func(ctx context.Context, method string, req, reply any, _ *grpc.ClientConn, _ grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return conns[rand.IntN(len(conns))].Invoke(ctx, method, req, reply, opts...)
	}
	client := first.Client(t, grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor(
		idempotency.WithMaxAttempts(100),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 20 * time.Millisecond }),
	), spread))

	slots := reshardSlots(ctx, t, cluster)
	var open atomic.Int64 // keys below open may be called
	var migrations atomic.Int64
	var migrator sync.WaitGroup
	migrator.Go(func() {
		defer open.Store(reshardKeys) // let the callers finish after a failure
		for j, slot := range slots {
			opts := redistest.MigrateOptions{Pause: reshardPause, Migrating: func() { open.Store(int64(j + 1)) }}
			from, err := cluster.MigrateSlot(ctx, slot, 0, opts)
			if err != nil {
				t.Errorf("migrating slot %d: %v", slot, err)
				return
			}
			if from == 0 {
				open.Store(int64(j + 1)) // already there: nothing moved
				continue
			}
			migrations.Add(1)
		}
	})

	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range reshardCallers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= reshardCalls {
					return
				}
				c := soakCall{reshardKey(i / reshardPerKey), i / reshardPerKey}
				for open.Load() <= c.amount && ctx.Err() == nil {
					time.Sleep(100 * time.Microsecond)
				}
				resp, err := client.Do(ctx, c.request(), idempotency.WithKey(c.key))
				if err != nil || resp.GetPayload() != c.key || resp.GetAmount() != c.amount || resp.GetExecution() != 1 {
					t.Errorf("call %d with %s: %v, %v; want its own answer, from its one execution", i, c.key, resp, err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	migrator.Wait()

	if msg := storeKeyMismatch.Load(); msg != nil {
		t.Fatalf("testStoreKey does not compute the interceptor's store key: %v", msg)
	}
	doubles := keys.doubles(t)
	t.Logf("%d calls on %d keys in %v while %d slot migrations ran; redirects: %v; %d double executions",
		reshardCalls, reshardKeys, elapsed.Round(time.Millisecond), migrations.Load(), &redirects, doubles)
	if doubles != 0 {
		t.Fatalf("%d keys ran twice", doubles)
	}
	for _, kind := range []string{"MOVED", "ASK"} {
		for _, cmd := range []string{"set", "evalsha"} {
			if redirects.Count(kind, cmd) == 0 {
				t.Errorf("no %s %s: the soak did not prove that %s follows %s (%d migrations, redirects %v)", kind, cmd, cmd, kind, migrations.Load(), &redirects)
			}
		}
	}
	for j := range int64(reshardKeys) {
		c := soakCall{reshardKey(j), j}
		var header metadata.MD
		resp, err := client.Do(ctx, c.request(), idempotency.WithKey(c.key), grpc.Header(&header))
		if err != nil || resp.GetExecution() != 1 {
			t.Fatalf("replay of %s after the soak: %v, %v", c.key, resp, err)
		}
		wantReplayed(t, header, true)
	}
}

func reshardKey(j int64) string { return fmt.Sprintf("reshard-%04d", j) }

// reshardSlots returns the slot of each key's store key, by key index.
func reshardSlots(ctx context.Context, t *testing.T, cluster *redistest.Cluster) []int {
	t.Helper()
	rdb := cluster.Client()
	slots := make([]int, reshardKeys)
	for j := range slots {
		k := redisstore.DefaultPrefix + testStoreKey(testingv1.TestService_Do_FullMethodName, reshardKey(int64(j)))
		slot, err := rdb.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[j] = int(slot)
	}
	return slots
}

// testStoreKey computes the store key the interceptor derives from the
// method and a client key, with no scope: base64url SHA-256 of each part
// prefixed by its length as a uvarint. The soak checks it against the
// claims the handler sees, so a change of derivation fails loudly here.
func testStoreKey(method, key string) string {
	var b []byte
	for _, s := range []string{method, "", key} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
