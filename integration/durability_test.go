package idempotency_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// The tests in this file prove the "can run twice" column of the
// durability table (SECURITY.md): what each store does not survive. They
// pass when the handler does run twice, so that the documentation cannot
// promise more than the stores keep.

// TestDurabilityMemoryRestartForgets: the memory store lives in the
// process; a restart within the retention forgets every key.
func TestDurabilityMemoryRestartForgets(t *testing.T) {
	t.Parallel()
	var count sharedCounter
	run := func() int64 {
		mem := memorystore.New()
		defer func() { _ = mem.Close() }()
		rig := newRedisRig(t, mem, redisRigConfig{handler: count.handler(nil)})
		resp, _, err := rig.do(t.Context(), "k-restart", &testingv1.DoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetExecution()
	}
	if first, second := run(), run(); first != 1 || second != 2 {
		t.Fatalf("executions %d then %d, want the restarted process to run the handler again", first, second)
	}
}

// TestDurabilityRedisRestartForgets: a Redis node without persistence that
// restarts forgets every key, so a retry runs the handler again.
func TestDurabilityRedisRestartForgets(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	rs := redistest.StartServer(t)
	var count sharedCounter
	rig := newRedisRig(t, redisstore.New(rs.Client()), redisRigConfig{handler: count.handler(nil)})
	if _, _, err := rig.do(ctx, "k-redis-restart", &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	rs.Restart()
	var resp *testingv1.DoResponse
	var err error
	waitFor(t, func() bool {
		resp, _, err = rig.do(ctx, "k-redis-restart", &testingv1.DoRequest{})
		return err == nil
	})
	if resp.GetExecution() != 2 || count.load() != 2 {
		t.Fatalf("after the restart: execution %d of %d, want a second execution", resp.GetExecution(), count.load())
	}
}

// TestDurabilityUnsettledClaimRunsAgainAfterLease: a server that dies
// between the handler's side effect and Complete (here: its store link
// goes down, so nothing completes or renews the claim) leaves the key in
// flight until the lease ends; then a retry on another server runs the
// handler again. Fencing with ClaimFromContext, or completing inside the
// handler's transaction (PostgreSQL), closes this window.
func TestDurabilityUnsettledClaimRunsAgainAfterLease(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	rs := redistest.StartServer(t)
	const lease = 300 * time.Millisecond
	var count sharedCounter
	dying := faultstore.New(redisstore.New(rs.Client()))
	a := newRedisRig(t, dying, redisRigConfig{
		handler: count.handler(func(context.Context, int64) { dying.Down.Store(true) }),
		opts:    []idempotency.ServerOption{idempotency.WithLease(lease), idempotency.WithStoreTimeout(100 * time.Millisecond)},
	})
	b := newRedisRig(t, redisstore.New(rs.Client()), redisRigConfig{
		handler: count.handler(nil),
		opts:    []idempotency.ServerOption{idempotency.WithLease(lease)},
	})
	if _, _, err := a.do(ctx, "k-unsettled", &testingv1.DoRequest{}); err != nil {
		t.Fatal(err) // A's answer still goes back; only the store lost it
	}
	_, _, err := b.do(ctx, "k-unsettled", &testingv1.DoRequest{})
	wantReason(t, err, codes.Aborted, idempotency.ErrKeyInUse.Reason) // in flight until the lease ends
	time.Sleep(lease)
	resp, _, err := b.do(ctx, "k-unsettled", &testingv1.DoRequest{})
	if err != nil || resp.GetExecution() != 2 {
		t.Fatalf("after the lease: %v, %v; want a second execution", resp, err)
	}
}

// TestDurabilityRedisFailoverLosesUnreplicatedWrite: Redis replicates
// asynchronously. A completion acknowledged by the master but not yet
// copied to its replica is lost when the replica is promoted (as Sentinel
// does after the master dies), and the retry runs the handler again.
// redisstore.WithMinReplicas (WAIT) narrows this window.
func TestDurabilityRedisFailoverLosesUnreplicatedWrite(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	master, replica := redistest.StartServer(t), redistest.StartServer(t)
	link := chaosProxy(t, master.Addr()) // the replication link
	host, port, _ := net.SplitHostPort(link.Addr())
	rc := replica.Client()
	if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		info, _ := rc.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	var count sharedCounter
	a := newRedisRig(t, redisstore.New(master.Client()), redisRigConfig{handler: count.handler(nil)})
	link.Stall() // the master's writes stop reaching the replica
	if _, _, err := a.do(ctx, "k-failover", &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	master.Stop()
	if err := rc.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil { // promoted
		t.Fatal(err)
	}
	b := newRedisRig(t, redisstore.New(rc), redisRigConfig{handler: count.handler(nil)})
	resp, _, err := b.do(ctx, "k-failover", &testingv1.DoRequest{})
	if err != nil || resp.GetExecution() != 2 {
		t.Fatalf("after the failover: %v, %v; want a second execution", resp, err)
	}
}

// TestDurabilityRedisEvictionForgets: with an eviction policy other than
// noeviction, a full Redis may drop a completed outcome, and the retry runs
// the handler again. Run the store's Redis with noeviction.
func TestDurabilityRedisEvictionForgets(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	rs := redistest.StartServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru")
	rdb := rs.Client()
	var count sharedCounter
	rig := newRedisRig(t, redisstore.New(rdb), redisRigConfig{handler: count.handler(nil)})
	if _, _, err := rig.do(ctx, "k-evicted", &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	keys := redisKeys(ctx, t, rdb, "")
	if len(keys) != 1 {
		t.Fatalf("Redis holds %q, want the one record", keys)
	}
	blob := strings.Repeat("x", 64<<10)
	for i := 0; ; i++ {
		if n, err := rdb.Exists(ctx, keys[0]).Result(); err != nil || n == 0 {
			break
		}
		if i == 10000 {
			t.Fatal("the record was never evicted")
		}
		if err := rdb.Set(ctx, "filler:"+strconv.Itoa(i), blob, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	resp, _, err := rig.do(ctx, "k-evicted", &testingv1.DoRequest{})
	if err != nil || resp.GetExecution() != 2 {
		t.Fatalf("after eviction: %v, %v; want a second execution", resp, err)
	}
}
