package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// ledger is a downstream system that fences writes with the claim of the
// execution that makes them, the pattern SECURITY.md documents.
//
// Owner tokens cannot be compared for order in general: the memory store's
// increase per key, but Redis's are random. So the ledger does not keep
// "the highest token seen"; it keeps the token of the latest execution that
// began for the claim key (Begin), and accepts a write only from that
// token. An execution whose lease was lost and taken over has been
// superseded by the new owner's Begin, so its late write is refused. The
// ledger also applies at most one write per claim key, so an old owner that
// writes before the new one begins cannot make the new one write twice.
type ledger struct {
	mu      sync.Mutex
	owner   map[string]string // claim key -> token of the latest Begin
	posted  map[string]int64  // claim key -> amount posted
	refused int
}

var (
	errFenced        = errors.New("ledger: a newer execution owns this key")
	errAlreadyPosted = errors.New("ledger: already posted for this key")
)

func newLedger() *ledger {
	return &ledger{owner: map[string]string{}, posted: map[string]int64{}}
}

// Begin records that the execution holding c now owns c.StoreKey.
func (l *ledger) Begin(c idempotency.Claim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.owner[c.StoreKey] = c.Token
}

// Post applies amount once per claim key, and only for its current owner.
func (l *ledger) Post(c idempotency.Claim, amount int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.owner[c.StoreKey] != c.Token:
		l.refused++
		return errFenced
	case l.posted[c.StoreKey] != 0:
		return errAlreadyPosted
	}
	l.posted[c.StoreKey] = amount
	return nil
}

// counts returns the number of refused writes and of postings.
func (l *ledger) counts() (refused, postings int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused, len(l.posted)
}

// ledgerHandler posts the request's amount under its claim. The first
// execution begins, then waits for proceed before posting, so the test can
// make its lease run out in between.
func ledgerHandler(l *ledger, begun chan<- struct{}, proceed <-chan struct{}) testserver.HandlerFunc {
	var once sync.Once
	return func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		c, ok := idempotency.ClaimFromContext(ctx)
		if !ok {
			return nil, status.Error(codes.Internal, "no claim")
		}
		l.Begin(c)
		first := false
		once.Do(func() { first = true })
		if first {
			close(begun)
			<-proceed
		}
		switch err := l.Post(c, req.GetAmount()); {
		case errors.Is(err, errFenced):
			// Superseded: a newer execution answers this key.
			return nil, status.Error(codes.Aborted, err.Error())
		case err != nil && !errors.Is(err, errAlreadyPosted):
			return nil, status.Error(codes.Internal, err.Error())
		}
		return &testingv1.DoResponse{Amount: req.GetAmount()}, nil
	}
}

// TestChaosFencingWithClaim: a handler passes its claim to a ledger that
// fences writes. The first execution loses its lease while it runs (its
// renewals are skipped, over the memory store and over Redis), a second
// execution takes the key over and posts; the first execution's late post
// is refused by the ledger. Two executions, one posting.
func TestChaosFencingWithClaim(t *testing.T) {
	t.Parallel()
	for name, newStore := range storeBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l := newLedger()
			begun, proceed := make(chan struct{}), make(chan struct{})
			fs := faultstore.New(newStore(t))
			fs.SkipExtend.Store(true) // the first owner looks alive, its lease runs out
			srv := testserver.New(t, &testserver.Service{Handler: ledgerHandler(l, begun, proceed)}, grpc.ChainUnaryInterceptor(
				idempotency.UnaryServerInterceptor(fs, idempotency.WithLease(100*time.Millisecond), idempotency.WithRetryAfter(10*time.Millisecond))))
			client := srv.Client(t)
			req := &testingv1.DoRequest{Amount: 500}
			key := withKey(ctx, "k-fenced")

			firstErr := make(chan error, 1)
			go func() {
				_, err := client.Do(key, req)
				firstErr <- err
			}()
			<-begun
			resp, err := callUntilNotInUse(ctx, 10*time.Millisecond, func() (*testingv1.DoResponse, error) {
				return client.Do(key, req)
			})
			if err != nil || resp.GetAmount() != 500 {
				t.Fatalf("second execution: %v, %v; want it to take over and post", resp, err)
			}
			close(proceed)
			if err := <-firstErr; status.Code(err) != codes.Aborted {
				t.Fatalf("first execution answered %v, want ABORTED: the ledger refused its late post", err)
			}
			if refused, postings := l.counts(); srv.Service.Executions() != 2 || refused != 1 || postings != 1 {
				t.Fatalf("executions %d, refused posts %d, postings %d; want 2, 1, 1", srv.Service.Executions(), refused, postings)
			}
			// The second owner's outcome is the one stored.
			if resp, err := client.Do(key, req); err != nil || resp.GetAmount() != 500 || srv.Service.Executions() != 2 {
				t.Fatalf("later call: %v, %v, executions %d; want the replay", resp, err, srv.Service.Executions())
			}
		})
	}
}
