package idempotency_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestRedisSentinel builds the interceptor over a store on
// redis.NewFailoverClient, which finds the master through Redis Sentinel,
// and checks an executed call and its replay, with the entry on the
// master the sentinel reports.
func TestRedisSentinel(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	sentinel := redistest.StartSentinel(t)
	rdb := redis.NewFailoverClient(sentinel.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	r := newRedisRig(t, redisstore.New(rdb), redisRigConfig{})

	req := &testingv1.DoRequest{Payload: "via sentinel", Amount: 5}
	first, header, err := r.do(ctx, "k-sentinel", req)
	if err != nil {
		t.Fatal(err)
	}
	wantReplayed(t, header, false)
	redisOnlyKey(ctx, t, sentinel.Master.Client(), redisstore.DefaultPrefix)

	second, header, err := r.do(ctx, "k-sentinel", req)
	if err != nil {
		t.Fatal(err)
	}
	wantReplayed(t, header, true)
	if got, want := deterministic(t, second), deterministic(t, first); string(got) != string(want) {
		t.Fatalf("replay %v, want %v", second, first)
	}
	if n := r.srv.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}
