package sqlitestore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// keeping decorates the real store: every claim keeps its entry an hour
// beyond its lease, as a claim under a policy that blocks or recovers
// abandoned keys does.
type keeping struct{ store.Store }

func (k keeping) Claim(ctx context.Context, key string, fp []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	opts.Keep = time.Hour
	return k.Store.Claim(ctx, key, fp, lease, opts)
}

// TestCompleteTxOfAbandonedClaim: a handler whose claim was abandoned
// (its lease ended: here by Abandon, at once) still records its outcome
// with CompleteTx while its token owns the entry, and a retry replays it;
// once another claim took the entry over, CompleteTx refuses with
// store.ErrLeaseLost and the handler's transaction rolls back.
func TestCompleteTxOfAbandonedClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		takeOver bool
	}{
		{"owner completes", false},
		{"taken over", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, db := newLedgerStore(t)
			completed := make(chan error, 1) // CompleteTx's error
			handler := func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				resp := &testingv1.DoResponse{Payload: req.GetPayload()}
				o, err := idempotency.NewTxOutcome(ctx, resp, nil)
				if err != nil {
					return nil, err
				}
				if err := s.Abandon(ctx, o.StoreKey, o.Token); err != nil {
					return nil, err
				}
				info, err := s.Lookup(ctx, o.StoreKey)
				if err != nil || info.State != store.StateAbandoned || info.Token != o.Token {
					return nil, status.Errorf(codes.Internal, "lookup after Abandon: %+v, %v", info, err)
				}
				if tc.takeOver {
					c, err := s.Claim(ctx, o.StoreKey, info.Fingerprint, time.Hour, store.ClaimOptions{Keep: time.Hour, TakeOver: true})
					if err != nil || !c.Won() || c.Attempt != 2 {
						return nil, status.Errorf(codes.Internal, "take-over: %+v, %v", c, err)
					}
				}
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return nil, err
				}
				defer func() { _ = tx.Rollback() }()
				if _, err := tx.ExecContext(ctx, "INSERT INTO ledger (payload) VALUES (?)", req.GetPayload()); err != nil {
					return nil, err
				}
				err = s.CompleteTx(ctx, tx, resp)
				completed <- err
				if err != nil {
					return nil, status.Error(codes.Unavailable, err.Error())
				}
				return resp, tx.Commit()
			}
			srv := testserver.New(t, &testserver.Service{Handler: handler},
				grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(keeping{s})))
			client := srv.Client(t)
			_, err := client.Do(keyed(t.Context(), "k"), &testingv1.DoRequest{Payload: "late"})
			var completeErr error
			select {
			case completeErr = <-completed:
			default:
				t.Fatalf("the handler did not reach CompleteTx: %v", err)
			}
			if !tc.takeOver {
				if err != nil || completeErr != nil {
					t.Fatalf("call whose claim was abandoned: %v (CompleteTx: %v), want its outcome recorded", err, completeErr)
				}
				var header metadata.MD
				resp, err := client.Do(keyed(t.Context(), "k"), &testingv1.DoRequest{Payload: "late"}, grpc.Header(&header))
				if err != nil || resp.GetPayload() != "late" || !slices.Contains(header.Get(idempotency.ReplayedKey), "true") {
					t.Fatalf("retry: %v, %v, replayed=%v, want the recorded outcome replayed", resp, err, header.Get(idempotency.ReplayedKey))
				}
				if n := ledgerRows(t, db, "late"); n != 1 {
					t.Fatalf("%d ledger rows, want 1", n)
				}
				return
			}
			if !errors.Is(completeErr, store.ErrLeaseLost) {
				t.Fatalf("CompleteTx after a take-over: %v, want store.ErrLeaseLost", completeErr)
			}
			if err == nil {
				t.Fatal("call whose claim was taken over succeeded")
			}
			if n := ledgerRows(t, db, "late"); n != 0 {
				t.Fatalf("%d ledger rows, want 0: the transaction must roll back", n)
			}
		})
	}
}
