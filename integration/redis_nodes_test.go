package idempotency_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestRedisClusterNodeDown stops the Cluster master that owns one key:
// calls with that key get UNAVAILABLE with IDEMPOTENCY_STORE_UNAVAILABLE
// (a retry mends it), while calls whose keys live on the other masters go
// on, in the same store; once the master is back (empty: no persistence)
// the same store serves its keys again.
func TestRedisClusterNodeDown(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	cluster := redistest.StartCluster(t)
	opts := cluster.Options()
	opts.MaxRetries, opts.DialTimeout = -1, 200*time.Millisecond
	rdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	r := newRedisRig(t, redisstore.New(rdb), redisRigConfig{opts: []idempotency.ServerOption{idempotency.WithStoreTimeout(2 * time.Second)}})

	// One key on the master that stops, and keys on the others.
	const down = 1
	var downKey string
	var upKeys []string
	for i := 0; downKey == "" || len(upKeys) < 4; i++ {
		key := fmt.Sprintf("node-%d", i)
		slot, err := rdb.ClusterKeySlot(ctx, redisstore.DefaultPrefix+testStoreKey(testingv1.TestService_Do_FullMethodName, key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		owner, err := cluster.SlotOwner(ctx, int(slot))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case owner == down && downKey == "":
			downKey = key
		case owner != down:
			upKeys = append(upKeys, key)
		}
	}
	req := &testingv1.DoRequest{Payload: "p"}
	if _, _, err := r.do(ctx, downKey, req); err != nil {
		t.Fatal(err)
	}

	cluster.StopNode(down)
	_, _, err := r.do(ctx, downKey, req)
	wantReason(t, err, codes.Unavailable, idempotency.ErrStoreUnavailable.Reason)
	for _, key := range upKeys {
		if _, header, err := r.do(ctx, key, req); err != nil {
			t.Fatalf("call with %s, on a master that runs: %v", key, err)
		} else {
			wantReplayed(t, header, false)
		}
	}

	cluster.RestartNode(down)
	var resp *testingv1.DoResponse
	waitFor(t, func() bool {
		resp, _, err = r.do(ctx, downKey, req)
		return err == nil
	})
	if resp.GetExecution() == 0 {
		t.Fatalf("call with %s after the restart: %v", downKey, resp)
	}
}
