package idempotency_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestRedisOutOfMemory: what a Redis out of memory refuses and what it
// still serves, on a Redis started with maxmemory 4mb and maxmemory-policy
// noeviction. Two handlers claim their keys, then Redis runs out of memory
// while they run. Under OOM: their leases are renewed; a duplicate of a
// running call is still told the key is in use; a new key is refused with
// RESOURCE_EXHAUSTED IDEMPOTENCY_STORE_FULL. Then the first handler answers
// and its outcome is stored (Complete goes through under OOM), and the
// second fails with UNAVAILABLE and its claim is released. The client's
// retry of the first call is a replay, under OOM and again once memory is
// free: the handler ran once.
func TestRedisOutOfMemory(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	rs := redistest.StartServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	rdb := rs.Client()
	st := redisstore.New(rs.Client())
	if err := st.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	var count sharedCounter
	running, proceed := make(chan struct{}, 2), make(chan struct{})
	echo := count.handler(func(ctx context.Context, _ int64) {
		running <- struct{}{}
		<-proceed
	})
	handler := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		resp, err := echo(ctx, m, req)
		if req.GetPayload() == "fails" {
			return nil, status.Error(codes.Unavailable, "card network down")
		}
		return resp, err
	}
	r := newRedisRig(t, st, redisRigConfig{handler: handler, opts: []idempotency.ServerOption{
		idempotency.WithLease(redisLease),
		idempotency.WithRetryAfter(20 * time.Millisecond),
		// Bounds how long the old code retried a refused Complete.
		idempotency.WithStoreTimeout(time.Second),
	}})
	charge := &testingv1.DoRequest{Payload: "charge", Amount: 4200}
	type result struct {
		resp *testingv1.DoResponse
		err  error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		resp, _, err := r.do(ctx, "k-oom", charge)
		first <- result{resp, err}
	}()
	go func() {
		resp, _, err := r.do(ctx, "k-oom-fails", &testingv1.DoRequest{Payload: "fails"})
		second <- result{resp, err}
	}()
	<-running
	<-running // both claims granted

	filled := rs.FillMemory(ctx, "filler:")
	renewed := r.events.Count(idempotency.DecisionLeaseRenewed)
	r.events.Wait(t, idempotency.DecisionLeaseRenewed, renewed+2)
	_, _, err := r.do(ctx, "k-oom", charge)
	wantReason(t, err, codes.Aborted, idempotency.ErrKeyInUse.Reason)
	_, _, err = r.do(ctx, "k-oom-new", charge)
	wantReason(t, err, codes.ResourceExhausted, idempotency.ErrStoreFull.Reason)

	close(proceed)
	one, two := <-first, <-second
	if one.err != nil || one.resp.GetExecution() == 0 {
		t.Fatalf("first call = %v, %v; want the handler's answer", one.resp, one.err)
	}
	if status.Code(two.err) != codes.Unavailable {
		t.Fatalf("second call = %v, want the handler's UNAVAILABLE", two.err)
	}
	for o, want := range map[idempotency.Decision]int{
		idempotency.DecisionExecuted:   1,
		idempotency.DecisionReleased:   1,
		idempotency.DecisionStoreError: 0,
		idempotency.DecisionLeaseLost:  0,
	} {
		if n := r.events.Count(o); n != want {
			t.Errorf("observer saw %d %s, want %d", n, o, want)
		}
	}
	if err := rdb.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM ") {
		t.Fatalf("SET after the calls = %v, want OOM: the steps above were not tested under OOM", err)
	}

	for _, when := range []string{"under OOM", "after memory was freed"} {
		if when == "after memory was freed" {
			rs.FreeMemory(ctx, "filler:", filled)
		}
		resp, header, _, err := doRetryingInUse(ctx, r.client, "k-oom", charge)
		if err != nil {
			t.Fatalf("retry %s: %v", when, err)
		}
		wantReplayed(t, header, true)
		if resp.GetExecution() != one.resp.GetExecution() {
			t.Fatalf("retry %s got execution %d, want the replay of %d", when, resp.GetExecution(), one.resp.GetExecution())
		}
	}
	if n := count.load(); n != 2 {
		t.Fatalf("handlers ran %d times, want 2 (one per key)", n)
	}
}
