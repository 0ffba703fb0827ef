package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// redisLease is the lease of the lease proofs: short, so they run fast,
// and long enough for a loaded machine to renew every lease/3.
const redisLease = 300 * time.Millisecond

// TestRedisLeaseRenewed: a handler that runs three times its lease
// completes normally, its lease renewed in Redis in the background. While
// it runs past its first lease, a duplicate on another server is still
// rejected as in flight (the claim in Redis outlived the unrenewed lease),
// and so is one after three leases; afterwards a retry replays its answer.
func TestRedisLeaseRenewed(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	rs := redistest.StartServer(t)
	var count sharedCounter
	started, release := make(chan time.Time, 1), make(chan struct{})
	hold := func(ctx context.Context, n int64) {
		if n != 1 {
			return // a second execution is the failure reported below
		}
		started <- time.Now()
		select {
		case <-release:
		case <-ctx.Done():
		}
	}
	opts := []idempotency.ServerOption{idempotency.WithLease(redisLease)}
	a := newRedisRig(t, redisstore.New(rs.Client()), redisRigConfig{handler: count.handler(hold), opts: opts})
	b := newRedisRig(t, redisstore.New(rs.Client()), redisRigConfig{handler: count.handler(hold), opts: opts})

	req := &testingv1.DoRequest{Payload: "long"}
	type result struct {
		resp *testingv1.DoResponse
		err  error
	}
	first := make(chan result, 1)
	go func() {
		resp, _, err := a.do(ctx, "k-long", req)
		first <- result{resp, err}
	}()
	start := <-started

	// Wait until the claim has lived past its lease, renewed.
	waitFor(t, func() bool {
		return time.Since(start) > redisLease+redisLease/3 && a.events.Count(idempotency.DecisionLeaseRenewed) >= 3
	})
	_, _, err := b.do(ctx, "k-long", req)
	wantReason(t, err, codes.Aborted, idempotency.ErrKeyInUse.Reason)

	// Let the handler run for three leases in all; the claim still holds.
	<-time.After(time.Until(start.Add(3 * redisLease)))
	_, _, err = b.do(ctx, "k-long", req)
	wantReason(t, err, codes.Aborted, idempotency.ErrKeyInUse.Reason)
	close(release)
	r := <-first
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := a.events.Count(idempotency.DecisionLeaseLost); n != 0 {
		t.Fatalf("%d DecisionLeaseLost, want none: the lease was renewed", n)
	}
	if n := a.events.Count(idempotency.DecisionExecuted); n != 1 {
		t.Fatalf("%d DecisionExecuted, want 1: the outcome should be stored", n)
	}
	resp, header, err := b.do(ctx, "k-long", req)
	if err != nil {
		t.Fatal(err)
	}
	wantReplayed(t, header, true)
	if resp.GetExecution() != r.resp.GetExecution() || count.load() != 1 {
		t.Fatalf("retry got %v after %d executions, want the replay of %v", resp, count.load(), r.resp)
	}
}

// TestRedisLeaseTakenOver: a claim whose lease ran out unrenewed is taken
// over, and its first owner's completion refused. Server A's renewals are
// stalled (faultstore.SkipExtend over the real store), so its claim expires
// in Redis while its handler runs; server B then claims the key, runs and
// completes. When A's handler finishes, A's completion is refused by Redis
// (the owner token no longer matches), the observer sees DecisionLeaseLost,
// and a third call replays B's answer, not A's.
func TestRedisLeaseTakenOver(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	rs := redistest.StartServer(t)
	rdb := rs.Client()
	var count sharedCounter
	started, release := make(chan struct{}), make(chan struct{})
	handler := count.handler(func(ctx context.Context, n int64) {
		if n != 1 {
			return
		}
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	opts := []idempotency.ServerOption{idempotency.WithLease(redisLease)}
	stalled := faultstore.New(redisstore.New(rdb))
	stalled.SkipExtend.Store(true)
	a := newRedisRig(t, stalled, redisRigConfig{handler: handler, opts: opts})
	b := newRedisRig(t, redisstore.New(rs.Client()), redisRigConfig{handler: handler, opts: opts})

	req := &testingv1.DoRequest{Payload: "p", Amount: 3}
	type result struct {
		resp *testingv1.DoResponse
		err  error
	}
	first := make(chan result, 1)
	go func() {
		resp, _, err := a.do(ctx, "k-taken", req)
		first <- result{resp, err}
	}()
	<-started
	key := redisOnlyKey(ctx, t, rdb, redisstore.DefaultPrefix)
	// The unrenewed claim expires in Redis.
	waitFor(t, func() bool { return rdb.Exists(ctx, key).Val() == 0 })

	second, header, err := b.do(ctx, "k-taken", req)
	if err != nil {
		t.Fatal(err)
	}
	wantReplayed(t, header, false)
	if second.GetExecution() != 2 {
		t.Fatalf("server B answered %v, want execution 2", second)
	}
	close(release)
	r := <-first
	if r.err != nil || r.resp.GetExecution() != 1 {
		t.Fatalf("server A answered %v, %v; want its own execution 1", r.resp, r.err)
	}
	if n := a.events.Count(idempotency.DecisionLeaseLost); n != 1 {
		t.Fatalf("server A observed %d DecisionLeaseLost, want 1", n)
	}
	if n := a.events.Count(idempotency.DecisionExecuted); n != 0 {
		t.Fatalf("server A observed %d DecisionExecuted, want 0: its completion must be refused", n)
	}
	var completeErr error
	for _, c := range stalled.Calls() {
		if c.Op == "complete" {
			completeErr = c.Err
		}
	}
	if !errors.Is(completeErr, store.ErrLeaseLost) {
		t.Fatalf("server A's Complete returned %v, want store.ErrLeaseLost from Redis", completeErr)
	}

	for name, r := range map[string]*redisRig{"A": a, "B": b} {
		third, header, err := r.do(ctx, "k-taken", req)
		if err != nil {
			t.Fatal(err)
		}
		wantReplayed(t, header, true)
		if third.GetExecution() != 2 {
			t.Fatalf("third call on server %s got %v, want the replay of B's execution 2", name, third)
		}
	}
	if n := count.load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}
