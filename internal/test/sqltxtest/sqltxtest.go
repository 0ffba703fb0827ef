// Package sqltxtest is the transactional-completion suite every SQL store
// (mysqlstore, postgresstore, sqlitestore) runs from its tests: a handler records its
// outcome with CompleteTx or CompleteErrorTx in its own transaction, behind
// the real interceptor on a loopback gRPC server. It lives here, not in
// store/storetest, because it drives the root package's interceptor, which
// store/ may not import; each store gives it its dialect in a [Rig].
package sqltxtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// Tx is a handler's transaction on the database of the store's table.
type Tx interface {
	// Charge writes a ledger row of payload in the transaction.
	Charge(ctx context.Context, payload string) error
	// CompleteTx and CompleteErrorTx are the store's, in the transaction.
	CompleteTx(ctx context.Context, resp proto.Message) error
	CompleteErrorTx(ctx context.Context, err error) error
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Rig is a store on a table of its own, with a ledger table beside it, as
// [Run] drives it.
type Rig struct {
	// Store is the store, closed when the test ends.
	Store store.Store
	// Begin begins a handler's transaction.
	Begin func(ctx context.Context) (Tx, error)
	// LedgerRows counts the ledger rows of payload.
	LedgerRows func(t *testing.T, payload string) int
	// ExpireAll ends the lease or retention of every row of the store's
	// table, by the database's clock.
	ExpireAll func(t *testing.T)
	// OneWriter says that the database lets one transaction write at a
	// time (SQLite): a handler's transaction holds every other write back
	// until it ends, so AfterTakeover begins it once the claim is lost,
	// rather than before, where the take-over would wait for it.
	OneWriter bool
}

// Run runs the suite, each case a parallel subtest on a rig newRig makes.
func Run(t *testing.T, newRig func(t *testing.T) Rig) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(*testing.T, func(*testing.T) Rig)
	}{
		{"CompleteTx", completeTx},
		{"RolledBack", rolledBack},
		{"CompleteErrorTx", completeErrorTx},
		{"Refusals", refusals},
		{"RenewalBlockedByTheTransaction", renewalBlocked},
		{"AfterTakeover", afterTakeover},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newRig)
		})
	}
}

// fixture is a gRPC server whose handler writes a ledger row and records
// its outcome with CompleteTx in one transaction. The interceptor reaches
// the store through a recording fault store, to count its own calls.
type fixture struct {
	Rig
	calls  *faultstore.Store
	srv    *testserver.Server
	client testingv1.TestServiceClient
	events *testkit.Events
}

type handler func(ctx context.Context, f *fixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error)

func newFixture(t *testing.T, newRig func(*testing.T) Rig, h handler, opts ...idempotency.ServerOption) *fixture {
	t.Helper()
	r := newRig(t)
	f := &fixture{Rig: r, calls: faultstore.New(r.Store), events: &testkit.Events{}}
	opts = append([]idempotency.ServerOption{idempotency.WithObserver(f.events)}, opts...)
	f.srv = testserver.New(t, &testserver.Service{Handler: func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return h(ctx, f, req)
	}}, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(f.calls, opts...)))
	f.client = f.srv.Client(t)
	return f
}

// charge is the handler's usual transaction: a ledger row, then the
// outcome, then the commit.
func charge(ctx context.Context, f *fixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	tx, err := f.Begin(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tx.Charge(ctx, req.GetPayload()); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &testingv1.DoResponse{Payload: req.GetPayload()}
	if err := tx.CompleteTx(ctx, resp); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return resp, nil
}

func keyed(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, key)
}

// replayed reports whether a call's header or trailer carries the replay
// marker.
func replayed(header, trailer metadata.MD) bool {
	return slices.Contains(append(header.Get(idempotency.ReplayedKey), trailer.Get(idempotency.ReplayedKey)...), "true")
}

// completeTx: the outcome commits with the ledger row, and the
// interceptor makes no store call after the handler.
func completeTx(t *testing.T, newRig func(*testing.T) Rig) {
	f := newFixture(t, newRig, charge)
	ctx := keyed(t.Context(), "k")
	for i := range 3 {
		var header, trailer metadata.MD
		resp, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "p"}, grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil || resp.GetPayload() != "p" {
			t.Fatalf("call %d: %v, %v", i, resp, err)
		}
		if got := replayed(header, trailer); got != (i > 0) {
			t.Fatalf("call %d: replayed=%v", i, got)
		}
	}
	if n := f.LedgerRows(t, "p"); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
	if c, r := f.calls.Count("complete"), f.calls.Count("release"); c != 0 || r != 0 {
		t.Fatalf("the interceptor made %d Complete and %d Release calls, want none", c, r)
	}
	if n := f.events.Count(idempotency.DecisionExecuted); n != 1 {
		t.Fatalf("%d executed events, want 1", n)
	}
}

// rolledBack: a transaction that recorded its outcome and then rolled
// back leaves nothing: the release frees the key, and the retry runs the
// handler again.
func rolledBack(t *testing.T, newRig func(*testing.T) Rig) {
	var runs sync.Map
	f := newFixture(t, newRig, func(ctx context.Context, f *fixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if _, again := runs.LoadOrStore("ran", true); again {
			return charge(ctx, f, req)
		}
		tx, err := f.Begin(ctx)
		if err != nil {
			return nil, err
		}
		if err := tx.Charge(ctx, req.GetPayload()); err != nil {
			return nil, err
		}
		if err := tx.CompleteTx(ctx, &testingv1.DoResponse{Payload: "first"}); err != nil {
			return nil, err
		}
		_ = tx.Rollback(ctx)
		return nil, status.Error(codes.Unavailable, "rolled back")
	})
	ctx := keyed(t.Context(), "k")
	if _, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "rb"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("first call: %v, want UNAVAILABLE", err)
	}
	resp, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "rb"})
	if err != nil || resp.GetPayload() != "rb" {
		t.Fatalf("retry: %v, %v; want a second execution", resp, err)
	}
	if n := f.srv.Service.Executions(); n != 2 {
		t.Fatalf("%d executions, want 2", n)
	}
	if n := f.LedgerRows(t, "rb"); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
	if n := f.calls.Count("release"); n != 1 {
		t.Fatalf("%d releases, want 1", n)
	}
}

// completeErrorTx: a declined charge written to the ledger with its
// FAILED_PRECONDITION answer, replayed to the retry; an error that is not
// stored is refused and writes nothing.
func completeErrorTx(t *testing.T, newRig func(*testing.T) Rig) {
	declined := status.Error(codes.FailedPrecondition, "card declined")
	refusal := make(chan error, 1)
	f := newFixture(t, newRig, func(ctx context.Context, f *fixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tx, err := f.Begin(ctx)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := tx.Charge(ctx, req.GetPayload()); err != nil {
			return nil, err
		}
		if req.GetPayload() == "retryable" {
			refusal <- tx.CompleteErrorTx(ctx, status.Error(codes.Unavailable, "card network down"))
			return nil, status.Error(codes.Unavailable, "card network down")
		}
		if err := tx.CompleteErrorTx(ctx, declined); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		return nil, declined
	})
	ctx := keyed(t.Context(), "declined")
	for i := range 2 {
		var trailer metadata.MD
		_, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "declined"}, grpc.Trailer(&trailer))
		if st := status.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != "card declined" {
			t.Fatalf("call %d: %v, want FAILED_PRECONDITION card declined", i, err)
		}
		if got := replayed(nil, trailer); got != (i > 0) {
			t.Fatalf("call %d: replayed=%v", i, got)
		}
	}
	if n := f.LedgerRows(t, "declined"); n != 1 {
		t.Fatalf("%d ledger rows for the decline, want 1", n)
	}

	if _, err := f.client.Do(keyed(t.Context(), "retryable"), &testingv1.DoRequest{Payload: "retryable"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("retryable: %v", err)
	}
	if err := <-refusal; err == nil {
		t.Fatal("CompleteErrorTx accepted UNAVAILABLE, an error that releases the claim")
	}
	if n := f.LedgerRows(t, "retryable"); n != 0 {
		t.Fatalf("%d ledger rows for the refused outcome, want 0", n)
	}
}

// refusals: without a claim, ErrNoClaim; a second transaction of the same
// call, after the first committed the outcome, ErrLeaseLost (its side
// effects must roll back).
func refusals(t *testing.T, newRig func(*testing.T) Rig) {
	errs := make(chan error, 1)
	f := newFixture(t, newRig, func(ctx context.Context, f *fixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		resp, err := charge(ctx, f, req)
		if err != nil {
			errs <- err
			return nil, err
		}
		tx, err := f.Begin(ctx)
		if err != nil {
			errs <- err
			return nil, err
		}
		errs <- tx.CompleteTx(ctx, resp)
		_ = tx.Rollback(ctx)
		return resp, nil
	})
	if _, err := f.client.Do(t.Context(), &testingv1.DoRequest{Payload: "no key"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("call without a key: %v, want the handler's UNAVAILABLE", err)
	}
	if err := <-errs; status.Convert(err).Message() != idempotency.ErrNoClaim.Error() {
		t.Fatalf("CompleteTx without a claim: %v, want ErrNoClaim", err) // charge wrapped it in a status
	}
	if _, err := f.client.Do(keyed(t.Context(), "k2"), &testingv1.DoRequest{Payload: "twice"}); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("CompleteTx in a second transaction: %v, want ErrLeaseLost", err)
	}
	if n := f.LedgerRows(t, "twice"); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
}

// renewalBlocked: a lease renewal that comes while the handler's
// transaction holds the row waits for it. After a commit it finds the row
// completed (ErrLeaseLost, taken as completed by the transaction: no
// lease-lost event, the call succeeds); after a rollback it finds the
// claim in flight and renews it.
func renewalBlocked(t *testing.T, newRig func(*testing.T) Rig) {
	const lease = 1500 * time.Millisecond // renewal at 500ms
	for _, tc := range []struct {
		name      string
		commit    bool
		extendErr error
	}{
		{"commit", true, store.ErrLeaseLost},
		{"rollback", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			extending := make(chan struct{}, 1)
			signalling := func(t *testing.T) Rig {
				r := newRig(t)
				r.Store = signalExtend{Store: r.Store, entered: extending}
				return r
			}
			f := newFixture(t, signalling, func(ctx context.Context, f *fixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				tx, err := f.Begin(ctx)
				if err != nil {
					return nil, err
				}
				resp := &testingv1.DoResponse{Payload: req.GetPayload()}
				if err := tx.CompleteTx(ctx, resp); err != nil {
					return nil, err
				}
				// The renewal (at lease/3) has begun, and waits for the
				// row the transaction holds, or finds it once the
				// transaction ends: either way it sees what the
				// transaction left.
				<-extending
				if !tc.commit {
					_ = tx.Rollback(ctx)
					return nil, status.Error(codes.Unavailable, "rolled back")
				}
				if err := tx.Commit(ctx); err != nil {
					return nil, err
				}
				return resp, nil
			}, idempotency.WithLease(lease))
			_, err := f.client.Do(keyed(t.Context(), "k"), &testingv1.DoRequest{Payload: "p"})
			if tc.commit != (err == nil) {
				t.Fatalf("call: %v", err)
			}
			var extends []faultstore.Call
			for _, c := range f.calls.Calls() {
				if c.Op == "extend" {
					extends = append(extends, c)
				}
			}
			if len(extends) != 1 || !errors.Is(extends[0].Err, tc.extendErr) || (tc.extendErr == nil && extends[0].Err != nil) {
				t.Fatalf("extends: %+v, want one that returned %v", extends, tc.extendErr)
			}
			if n := f.events.Count(idempotency.DecisionLeaseLost); n != 0 {
				t.Fatalf("%d lease-lost events, want 0", n)
			}
		})
	}
}

// signalExtend is a store that says on entered when an Extend begins.
type signalExtend struct {
	store.Store
	entered chan<- struct{}
}

func (s signalExtend) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	return s.Store.Extend(ctx, key, token, lease)
}

// afterTakeover: the handler's lease ran out while its transaction (begun
// on a context of its own) was open, another server took the key over,
// and the interceptor cancelled the handler's context with the lost lease
// as its cause. CompleteTx then returns an error matching
// store.ErrLeaseLost, as the failure table of docs/stores.md says, not the
// context's cancellation.
func afterTakeover(t *testing.T, newRig func(*testing.T) Rig) {
	const lease = 600 * time.Millisecond // renewal at 200ms
	claimed := make(chan string, 1)
	completeErr := make(chan error, 1)
	f := newFixture(t, newRig, func(ctx context.Context, f *fixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tctx := context.WithoutCancel(ctx)
		begin := func() (Tx, error) {
			tx, err := f.Begin(tctx)
			if err != nil {
				return nil, err
			}
			// On the transaction's context: with OneWriter, the
			// handler's has ended by then.
			if err := tx.Charge(tctx, req.GetPayload()); err != nil {
				_ = tx.Rollback(tctx)
				return nil, err
			}
			return tx, nil
		}
		var tx Tx
		if !f.OneWriter {
			var err error
			if tx, err = begin(); err != nil {
				return nil, err
			}
		}
		c, _ := idempotency.ClaimFromContext(ctx)
		claimed <- c.StoreKey
		<-ctx.Done() // the renewal found the key taken over
		if f.OneWriter {
			var err error
			if tx, err = begin(); err != nil {
				completeErr <- err
				return nil, err
			}
		}
		defer func() { _ = tx.Rollback(tctx) }()
		completeErr <- tx.CompleteTx(ctx, &testingv1.DoResponse{Payload: req.GetPayload()})
		return nil, status.Error(codes.Unavailable, "rolled back")
	}, idempotency.WithLease(lease))
	done := make(chan error, 1)
	go func() {
		_, err := f.client.Do(keyed(t.Context(), "k"), &testingv1.DoRequest{Payload: "p"})
		done <- err
	}()
	key := <-claimed
	f.ExpireAll(t)
	if c, err := f.Store.Claim(t.Context(), key, []byte("other"), time.Hour, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("takeover: %+v, %v", c, err)
	}
	if err := <-completeErr; !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("CompleteTx after a takeover: %v, want ErrLeaseLost", err)
	}
	if err := <-done; err == nil {
		t.Fatal("the call succeeded, though its handler failed after the takeover")
	}
	if n := f.LedgerRows(t, "p"); n != 0 {
		t.Fatalf("%d ledger rows, want none", n)
	}
}
