package idempotency_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// proxiedRedis starts a fault proxy in front of rs and returns it with a
// go-redis client that reaches rs through it, with go-redis's default
// retries (a command whose connection breaks is resent, up to 3 times)
// and the store's scripts loaded. opt adjusts the client options; it may
// be nil. The client and the proxy close when the test ends.
func proxiedRedis(t *testing.T, rs *redistest.Server, opt func(*redis.Options)) (*faultproxy.Proxy, *redis.Client) {
	t.Helper()
	proxy, err := faultproxy.New(rs.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	o := &redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true}
	if opt != nil {
		opt(o)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	if err := redisstore.New(rdb).LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	return proxy, rdb
}

// TestRedisReleaseReplyLost: a handler fails with UNAVAILABLE, so the
// interceptor releases its claim; the reply to that release is lost (the
// release ran in Redis, the connection was cut) and go-redis resends it.
// The resend finds nothing left to release, which is success: the
// observer sees the release, not a lease_lost false alarm, and the
// client's retry runs the handler again on a free key.
func TestRedisReleaseReplyLost(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	rs := redistest.StartServer(t)
	proxy, rdb := proxiedRedis(t, rs, nil)
	var count sharedCounter
	echo := count.handler(nil)
	failFirst := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		resp, err := echo(ctx, m, req)
		if resp.GetExecution() == 1 {
			proxy.CutNextReply(1) // the next reply from Redis is the release's
			return nil, status.Error(codes.Unavailable, "card network down")
		}
		return resp, err
	}
	r := newRedisRig(t, redisstore.New(rdb), redisRigConfig{handler: failFirst})
	req := &testingv1.DoRequest{Payload: "p"}

	_, _, err := r.do(ctx, "k-release-reply-lost", req)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("first call = %v, want the handler's UNAVAILABLE", err)
	}
	if proxy.Cuts() != 1 {
		t.Fatalf("proxy cut %d connections, want 1 (the release's reply)", proxy.Cuts())
	}
	if n := r.events.Count(idempotency.DecisionLeaseLost); n != 0 {
		t.Fatalf("observer saw %d lease_lost for a release that landed, want 0", n)
	}
	if n := r.events.Count(idempotency.DecisionReleased); n != 1 {
		t.Fatalf("observer saw %d released, want 1", n)
	}
	if keys := redisKeys(ctx, t, rs.Client(), redisstore.DefaultPrefix); len(keys) != 0 {
		t.Fatalf("keys left after the release: %q, want none", keys)
	}
	resp, header, err := r.do(ctx, "k-release-reply-lost", req)
	if err != nil || resp.GetExecution() != 2 {
		t.Fatalf("retry = %v, %v; want execution 2 on the released key", resp, err)
	}
	wantReplayed(t, header, false)
}
