package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A Once inside a Once of the same operation and key passes through under
// the outer claim once; a second one in the same run finds the key in
// flight, so the inner function runs once per key.
func TestNestedOnceSameKeyRunsOnce(t *testing.T) {
	t.Parallel()
	f := newFnFixture(t)
	var inner atomic.Int64
	var rans [2]bool
	var errs [2]error
	_, err := idempotency.Once(t.Context(), f.srv, "op", "k", nil, func(ctx context.Context) error {
		for i := range rans {
			rans[i], errs[i] = idempotency.Once(ctx, f.srv, "op", "k", nil, func(context.Context) error { inner.Add(1); return nil })
		}
		return nil
	})
	if err != nil {
		t.Fatalf("outer Once: %v", err)
	}
	if n := inner.Load(); n != 1 {
		t.Fatalf("inner function ran %d times under one key (ran %v, errs %v)", n, rans, errs)
	}
	if !rans[0] || errs[0] != nil || rans[1] || !errors.Is(errs[1], idempotency.ErrKeyInUse) {
		t.Fatalf("inner Once calls: ran %v, errs %v; want the first to run and the second ErrKeyInUse", rans, errs)
	}
}

// A context that carries a claim, kept past the Once that claimed it (by
// a goroutine its function started), does not let a later Once with the
// key run again: it replays the stored outcome.
func TestClaimContextAfterOnceRunsOnce(t *testing.T) {
	t.Parallel()
	f := newFnFixture(t)
	var kept context.Context
	var runs atomic.Int64
	if _, err := idempotency.Once(t.Context(), f.srv, "op", "k", nil, func(ctx context.Context) error {
		kept = context.WithoutCancel(ctx)
		runs.Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ran, err := idempotency.Once(kept, f.srv, "op", "k", nil, func(context.Context) error { runs.Add(1); return nil })
	if ran || err != nil || runs.Load() != 1 {
		t.Fatalf("Once with the kept context after completion: ran %v, err %v, runs %d; want a replay", ran, err, runs.Load())
	}
}

// A nested Once that the work started in a goroutine of its own is still
// running when the work returns a retryable error: the claim is released
// only once the nested call has ended, so a retry cannot run the work again
// beside it.
func TestNestedOnceOutlivingItsWork(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := memorystore.New(memorystore.WithSweepInterval(0))
		defer func() { _ = mem.Close() }()
		srv := idempotency.NewServer(mem)
		var runs atomic.Int64
		nestedStarted, finishNested := make(chan struct{}), make(chan struct{})
		nestedErr := make(chan error, 1)
		work := func(ctx context.Context) error {
			runs.Add(1)
			go func() {
				_, err := idempotency.Once(ctx, srv, "op", "k", nil, func(context.Context) error {
					close(nestedStarted)
					<-finishNested
					return nil
				})
				nestedErr <- err
			}()
			<-nestedStarted // the nested call runs under the claim, and outlives the work
			return status.Error(codes.Unavailable, "try again")
		}
		outerDone := make(chan struct{})
		go func() {
			defer close(outerDone)
			_, _ = idempotency.Once(t.Context(), srv, "op", "k", nil, work)
		}()
		synctest.Wait() // the work has returned; the nested call runs

		if ran, err := idempotency.Once(t.Context(), srv, "op", "k", nil, work); ran || !errors.Is(err, idempotency.ErrKeyInUse) {
			t.Fatalf("Once while a nested call under the claim runs: ran %v, err %v; want ErrKeyInUse", ran, err)
		}
		close(finishNested)
		<-outerDone
		if err := <-nestedErr; err != nil {
			t.Fatalf("nested Once: %v", err)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the work ran %d times while its nested call ran, want 1", n)
		}
	})
}
