package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testkit"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// txFixture is a gRPC server whose handler writes a ledger row and records
// its outcome with CompleteTx in one transaction. The interceptor reaches
// the store through a recording fault store, to count its own calls.
type txFixture struct {
	store  *mysqlstore.Store
	db     *sql.DB
	ledger string // the ledger table, beside the store's
	calls  *faultstore.Store
	srv    *testserver.Server
	client testingv1.TestServiceClient
	events *testkit.Events
}

type txHandler func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error)

func newTxFixture(t *testing.T, h txHandler, opts ...idempotency.ServerOption) *txFixture {
	t.Helper()
	s, db := newStore(t, 4)
	return newTxFixtureOn(t, s, db, h, opts...)
}

// newTxFixtureOn is newTxFixture on the store s and the handler's pool.
func newTxFixtureOn(t *testing.T, s *mysqlstore.Store, db *sql.DB, h txHandler, opts ...idempotency.ServerOption) *txFixture {
	t.Helper()
	ledger := tableOf(t, s) + "_ledger"
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+ledger+" (payload VARCHAR(100) NOT NULL) ENGINE = InnoDB"); err != nil {
		t.Fatal(err)
	}
	f := &txFixture{store: s, db: db, ledger: ledger, calls: faultstore.New(s), events: &testkit.Events{}}
	opts = append([]idempotency.ServerOption{idempotency.WithObserver(f.events)}, opts...)
	f.srv = testserver.New(t, &testserver.Service{Handler: func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return h(ctx, f, req)
	}}, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(f.calls, opts...)))
	f.client = f.srv.Client(t)
	return f
}

// ledgerRows counts the ledger rows of payload.
func (f *txFixture) ledgerRows(t *testing.T, payload string) int {
	t.Helper()
	var n int
	if err := f.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+f.ledger+" WHERE payload = ?", payload).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// charge is the handler's usual transaction: a ledger row, then the
// outcome, then the commit.
func charge(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+f.ledger+" (payload) VALUES (?)", req.GetPayload()); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &testingv1.DoResponse{Payload: req.GetPayload()}
	if err := f.store.CompleteTx(ctx, tx, resp); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if err := tx.Commit(); err != nil {
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

// TestCompleteTx: the outcome commits with the ledger row, and the
// interceptor makes no store call after the handler.
func TestCompleteTx(t *testing.T) {
	t.Parallel()
	f := newTxFixture(t, charge)
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
	if n := f.ledgerRows(t, "p"); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
	if c, r := f.calls.Count("complete"), f.calls.Count("release"); c != 0 || r != 0 {
		t.Fatalf("the interceptor made %d Complete and %d Release calls, want none", c, r)
	}
	if n := f.events.Count(idempotency.DecisionExecuted); n != 1 {
		t.Fatalf("%d executed events, want 1", n)
	}
}

// TestCompleteTxRolledBack: a transaction that recorded its outcome and
// then rolled back leaves nothing: the release frees the key, and the retry
// runs the handler again.
func TestCompleteTxRolledBack(t *testing.T) {
	t.Parallel()
	var runs sync.Map
	f := newTxFixture(t, func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if _, again := runs.LoadOrStore("ran", true); again {
			return charge(ctx, f, req)
		}
		tx, err := f.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+f.ledger+" (payload) VALUES (?)", req.GetPayload()); err != nil {
			return nil, err
		}
		if err := f.store.CompleteTx(ctx, tx, &testingv1.DoResponse{Payload: "first"}); err != nil {
			return nil, err
		}
		_ = tx.Rollback()
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
	if n := f.ledgerRows(t, "rb"); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
	if n := f.calls.Count("release"); n != 1 {
		t.Fatalf("%d releases, want 1", n)
	}
}

// TestCompleteErrorTx: a declined charge written to the ledger with its
// FAILED_PRECONDITION answer, replayed to the retry; an error that is not
// stored is refused and writes nothing.
func TestCompleteErrorTx(t *testing.T) {
	t.Parallel()
	declined := status.Error(codes.FailedPrecondition, "card declined")
	refusal := make(chan error, 1)
	f := newTxFixture(t, func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tx, err := f.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+f.ledger+" (payload) VALUES (?)", req.GetPayload()); err != nil {
			return nil, err
		}
		if req.GetPayload() == "retryable" {
			refusal <- f.store.CompleteErrorTx(ctx, tx, status.Error(codes.Unavailable, "card network down"))
			return nil, status.Error(codes.Unavailable, "card network down")
		}
		if err := f.store.CompleteErrorTx(ctx, tx, declined); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		if err := tx.Commit(); err != nil {
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
	if n := f.ledgerRows(t, "declined"); n != 1 {
		t.Fatalf("%d ledger rows for the decline, want 1", n)
	}

	if _, err := f.client.Do(keyed(t.Context(), "retryable"), &testingv1.DoRequest{Payload: "retryable"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("retryable: %v", err)
	}
	if err := <-refusal; err == nil {
		t.Fatal("CompleteErrorTx accepted UNAVAILABLE, an error that releases the claim")
	}
	if n := f.ledgerRows(t, "retryable"); n != 0 {
		t.Fatalf("%d ledger rows for the refused outcome, want 0", n)
	}
}

// TestCompleteTxRefusals: without a claim, ErrNoClaim; a second
// transaction of the same call, after the first committed the outcome,
// ErrLeaseLost (its side effects must roll back).
func TestCompleteTxRefusals(t *testing.T) {
	t.Parallel()
	errs := make(chan error, 1)
	f := newTxFixture(t, func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		resp, err := charge(ctx, f, req)
		if err != nil {
			errs <- err
			return nil, err
		}
		tx, err := f.db.BeginTx(ctx, nil)
		if err != nil {
			errs <- err
			return nil, err
		}
		errs <- f.store.CompleteTx(ctx, tx, resp)
		_ = tx.Rollback()
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
	if n := f.ledgerRows(t, "twice"); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
}

// TestRenewalBlockedByTheTransaction: a lease renewal that comes while the
// handler's transaction holds the row waits for it. After a commit it finds
// the row completed (ErrLeaseLost, taken as completed by the transaction:
// no lease-lost event, the call succeeds); after a rollback it finds the
// claim in flight and renews it.
func TestRenewalBlockedByTheTransaction(t *testing.T) {
	t.Parallel()
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
			f := newTxFixture(t, func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				tx, err := f.db.BeginTx(ctx, nil)
				if err != nil {
					return nil, err
				}
				resp := &testingv1.DoResponse{Payload: req.GetPayload()}
				if err := f.store.CompleteTx(ctx, tx, resp); err != nil {
					return nil, err
				}
				time.Sleep(lease / 2) // the renewal comes at lease/3 and waits
				if !tc.commit {
					_ = tx.Rollback()
					return nil, status.Error(codes.Unavailable, "rolled back")
				}
				if err := tx.Commit(); err != nil {
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

// TestDuplicateNotBlockedByTheTransaction: while the handler's transaction
// holds the key's row after CompleteTx, a duplicate of the call is
// answered at once: ABORTED, in use (its claim, a plain read, sees the
// claim in flight), where a locking claim would wait for the commit.
// After the commit, the duplicate's retry replays.
func TestDuplicateNotBlockedByTheTransaction(t *testing.T) {
	t.Parallel()
	recorded, commit := make(chan struct{}), make(chan struct{})
	f := newTxFixture(t, func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tx, err := f.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+f.ledger+" (payload) VALUES (?)", req.GetPayload()); err != nil {
			return nil, err
		}
		resp := &testingv1.DoResponse{Payload: req.GetPayload()}
		if err := f.store.CompleteTx(ctx, tx, resp); err != nil {
			return nil, err
		}
		close(recorded)
		<-commit
		return resp, tx.Commit()
	})
	ctx := keyed(t.Context(), "k")
	first := make(chan error, 1)
	go func() {
		_, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "held"})
		first <- err
	}()
	<-recorded
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := f.client.Do(dctx, &testingv1.DoRequest{Payload: "held"})
	cancel()
	testkit.WantReason(t, err, codes.Aborted, "IDEMPOTENCY_KEY_IN_USE")
	close(commit)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	var header metadata.MD
	if _, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "held"}, grpc.Header(&header)); err != nil || !replayed(header, nil) {
		t.Fatalf("retry after the commit: %v, replayed=%v", err, replayed(header, nil))
	}
	if n := f.ledgerRows(t, "held"); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
}

// TestCompleteTxAfterTakeover: the handler's lease ran out while its
// transaction (begun on a context of its own) was open, another server took
// the key over, and the interceptor cancelled the handler's context with
// the lost lease as its cause. CompleteTx then returns an error matching
// store.ErrLeaseLost, as the failure table of docs/stores.md says, not the
// context's cancellation.
func TestCompleteTxAfterTakeover(t *testing.T) {
	t.Parallel()
	const lease = 600 * time.Millisecond // renewal at 200ms
	claimed := make(chan string, 1)
	completeErr := make(chan error, 1)
	f := newTxFixture(t, func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tx, err := f.db.BeginTx(context.WithoutCancel(ctx), nil)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+f.ledger+" (payload) VALUES (?)", req.GetPayload()); err != nil {
			return nil, err
		}
		c, _ := idempotency.ClaimFromContext(ctx)
		claimed <- c.StoreKey
		<-ctx.Done() // the renewal found the key taken over
		err = f.store.CompleteTx(ctx, tx, &testingv1.DoResponse{Payload: req.GetPayload()})
		completeErr <- err
		return nil, status.Error(codes.Unavailable, "rolled back")
	}, idempotency.WithLease(lease))
	done := make(chan error, 1)
	go func() {
		_, err := f.client.Do(keyed(t.Context(), "k"), &testingv1.DoRequest{Payload: "p"})
		done <- err
	}()
	key := <-claimed
	if _, err := f.db.ExecContext(t.Context(), "UPDATE "+tableOf(t, f.store)+" SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"); err != nil {
		t.Fatal(err)
	}
	if c, err := f.store.Claim(t.Context(), key, []byte("other"), time.Hour); err != nil || !c.Won() {
		t.Fatalf("takeover: %+v, %v", c, err)
	}
	if err := <-completeErr; !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("CompleteTx after a takeover: %v, want ErrLeaseLost", err)
	}
	<-done
	if n := f.ledgerRows(t, "p"); n != 0 {
		t.Fatalf("%d ledger rows, want none", n)
	}
}
