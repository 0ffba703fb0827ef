package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
	"github.com/grpc-idempotency/idempotency/store"
)

// lateReplyStore holds back the reply of its first claim: the claim lands
// in the store underneath, then its answer waits until release is closed,
// as on a link that stalls on the way back.
type lateReplyStore struct {
	store.Store
	landed, release chan struct{}
	claims          atomic.Int64
}

func (s *lateReplyStore) Claim(ctx context.Context, key string, fp []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	cl, err := s.Store.Claim(ctx, key, fp, lease, opts)
	if s.claims.Add(1) == 1 {
		close(s.landed)
		<-s.release
	}
	return cl, err
}

// A claim whose reply comes back after its lease ran out starts nothing:
// by then the store may have let another server take the key over, whose
// handler runs, so starting this one would run the work twice. The call
// fails as a duplicate of a call in flight does (ErrKeyInUse, ABORTED), an
// error a client retries, and its retry replays the other server's outcome. The first renewal is due a third of
// the lease after the claim was sent, not after the handler started.
func TestClaimWonAfterItsLeaseRanOutStartsNothing(t *testing.T) {
	t.Parallel()
	const lease = 100 * time.Millisecond // the shortest lease
	mem := memStore(t)
	late := &lateReplyStore{Store: mem, landed: make(chan struct{}), release: make(chan struct{})}
	slow := idempotency.NewServer(late, idempotency.WithLease(lease))
	other := idempotency.NewServer(mem, idempotency.WithLease(lease))
	req := &testingv1.DoRequest{Payload: "p", Amount: 1250}
	var runs atomic.Int64

	slowErr := make(chan error, 1)
	go func() {
		_, _, err := idempotency.Do(t.Context(), slow, "payments.charge", "k-late", req, numbered(&runs, req))
		slowErr <- err
	}()
	<-late.landed
	// The other server gets the key once the slow one's lease ran out in
	// the store, and runs it.
	wait.For(t, func() bool {
		_, _, err := idempotency.Do(t.Context(), other, "payments.charge", "k-late", req, numbered(&runs, req))
		if err != nil && !errors.Is(err, idempotency.ErrKeyInUse) {
			t.Fatalf("other server: %v", err)
		}
		return err == nil
	})
	close(late.release)
	err := <-slowErr
	if n := runs.Load(); n != 1 {
		t.Fatalf("the work ran %d times, want 1: the claim whose reply came after its lease ran out started it again", n)
	}
	if !errors.Is(err, idempotency.ErrKeyInUse) || !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("slow server's call: %v, want an error matching ErrKeyInUse and store.ErrLeaseLost", err)
	}
	resp, replayed, err := idempotency.Do(t.Context(), slow, "payments.charge", "k-late", req, numbered(&runs, req))
	if err != nil || !replayed || resp.GetExecution() != 1 {
		t.Fatalf("retry on the slow server: %v, replayed %t, execution %d; want the other server's outcome replayed", err, replayed, resp.GetExecution())
	}
}

// A claim whose reply came late, but in time, has its lease renewed a
// third of the lease after the claim was sent, at once here, not a third
// of the lease after the handler started: that would be past the lease's
// end, and the handler would be cancelled although a renewal could have
// kept its claim.
func TestSlowClaimRenewedOnTime(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	late := &lateReplyStore{Store: memStore(t), landed: make(chan struct{}), release: make(chan struct{})}
	renewed := make(chan struct{})
	var once sync.Once
	srv := idempotency.NewServer(late, idempotency.WithLease(lease),
		idempotency.WithObserver(idempotency.ObserverFunc(func(_ context.Context, e idempotency.Event) {
			if e.Decision == idempotency.DecisionLeaseRenewed {
				once.Do(func() { close(renewed) })
			}
		})))
	req := &testingv1.DoRequest{Payload: "p"}
	sent := time.Now()
	done := make(chan error, 1)
	go func() {
		_, _, err := idempotency.Do(t.Context(), srv, "payments.charge", "k-slow", req, func(ctx context.Context) (*testingv1.DoResponse, error) {
			select {
			case <-renewed:
				return &testingv1.DoResponse{Payload: "done"}, nil
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		})
		done <- err
	}()
	<-late.landed
	// The reply comes back with a quarter of the lease left.
	wait.For(t, func() bool { return time.Since(sent) >= lease*3/4 })
	close(late.release)
	if err := <-done; err != nil {
		t.Fatalf("Do = %v; want the handler's answer, its lease renewed in time", err)
	}
}
