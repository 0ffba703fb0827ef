package idempotency_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// replyLostRig is one server over a redisstore whose go-redis client
// reaches Redis through a fault proxy.
type replyLostRig struct {
	proxy  *faultproxy.Proxy
	srv    *testserver.Server
	client testingv1.TestServiceClient
	events *events
}

func newReplyLostRig(t *testing.T, maxRetries int, h testserver.HandlerFunc) *replyLostRig {
	t.Helper()
	rs := redistest.StartServer(t)
	proxy := chaosProxy(t, rs.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: maxRetries})
	t.Cleanup(func() { _ = rdb.Close() })
	st := redisstore.New(rdb)
	if err := st.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	srv := testserver.New(t, &testserver.Service{Handler: h}, grpc.ChainUnaryInterceptor(
		idempotency.UnaryServerInterceptor(st, idempotency.WithObserver(ev))))
	return &replyLostRig{proxy: proxy, srv: srv, client: srv.Client(t), events: ev}
}

// TestChaosClaimReplyLostRetriedByGoRedis: the reply to a Claim is lost
// (the command ran in Redis, the connection was cut). go-redis retries the
// same EVALSHA, with the same owner token, on a new connection (MaxRetries,
// default 3). The retry finds the entry its own first try created and
// reports it as someone else's claim in flight: the caller gets ABORTED
// IDEMPOTENCY_KEY_IN_USE for its own claim, and the key is blocked for a
// whole lease (60s by default) with no handler running. The soak shows it
// as most of its give-ups.
func TestChaosClaimReplyLostRetriedByGoRedis(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newReplyLostRig(t, 0, nil) // 0: go-redis's default of 3 retries
	r.proxy.CutNextReply(1)
	resp, err := r.client.Do(withKey(ctx, "k-claim-reply-lost"), &testingv1.DoRequest{Payload: "p"})
	if r.proxy.Cuts() != 1 {
		t.Fatalf("proxy cut %d connections, want 1", r.proxy.Cuts())
	}
	if status.Code(err) != codes.Aborted && err != nil {
		t.Fatalf("got %v, want an answer (or, with the bug, ABORTED)", err)
	}
	if err != nil || resp.GetExecution() != 1 {
		t.Fatalf("got %v, %v; want the handler to run: the claim in Redis is this call's own", resp, err)
	}
}

// TestChaosClaimReplyLostFreesKey: with go-redis retries off, a Claim
// whose reply is lost fails the call with UNAVAILABLE, which the client
// retries at once with the same key. The claim did land in Redis, owned by
// a token nobody holds, so the retry is refused as in flight until the
// lease ends (60s by default): a retryable error that cannot be retried.
func TestChaosClaimReplyLostFreesKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newReplyLostRig(t, -1, nil) // -1: no go-redis retries
	req := &testingv1.DoRequest{Payload: "p"}
	r.proxy.CutNextReply(1)
	_, err := r.client.Do(withKey(ctx, "k-orphan"), req)
	wantReason(t, err, codes.Unavailable, idempotency.ErrStoreUnavailable.Reason)
	if n := r.srv.Service.Executions(); n != 0 {
		t.Fatalf("handler ran %d times on a failed claim, want 0", n)
	}
	resp, err := r.client.Do(withKey(ctx, "k-orphan"), req)
	if status.Code(err) != codes.Aborted && err != nil {
		t.Fatalf("retry got %v, want an answer (or, with the bug, ABORTED)", err)
	}
	if err != nil || resp.GetExecution() != 1 {
		t.Fatalf("retry got %v, %v; want the handler to run", resp, err)
	}
}

// TestChaosCompleteReplyLost: the reply to a Complete is lost after the
// outcome was stored. The caller still gets its answer, and every retry
// replays it: the outcome is safe. But go-redis retries the Complete, the
// retry finds the entry completed (no owner any more) and returns
// ErrLeaseLost, so the observer reports lease_lost for an outcome that was
// stored: a false alarm for operators who alert on lost leases.
func TestChaosCompleteReplyLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var proxy *faultproxy.Proxy
	r := newReplyLostRig(t, 0, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		proxy.CutNextReply(1) // the next reply from Redis is the Complete's
		return testserver.Echo(ctx, m, req)
	})
	proxy = r.proxy
	req := &testingv1.DoRequest{Payload: "p"}
	for i := range 2 {
		resp, err := r.client.Do(withKey(ctx, "k-complete-reply-lost"), req)
		if err != nil || resp.GetExecution() != 1 {
			t.Fatalf("call %d: %v, %v; want execution 1 (a replay the second time)", i+1, resp, err)
		}
	}
	if proxy.Cuts() != 1 || r.srv.Service.Executions() != 1 {
		t.Fatalf("cuts %d, executions %d; want 1 and 1", proxy.Cuts(), r.srv.Service.Executions())
	}
	if n := r.events.Count(idempotency.DecisionLeaseLost); n != 0 {
		t.Fatalf("observer saw %d lease_lost for an outcome that was stored", n)
	}
	if n := r.events.Count(idempotency.DecisionExecuted); n != 1 {
		t.Fatalf("observer saw %d executed, want 1", n)
	}
}
