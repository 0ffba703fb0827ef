package mysqlstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// TestDuplicateNeverReadsUncommitted: on a pool whose connections read
// uncommitted rows (READ UNCOMMITTED in the DSN), a duplicate arriving
// while the handler's transaction is open after CompleteTx is told the key
// is in use, not replayed the answer the transaction may still roll back.
// The transaction rolls back; the retry runs the handler again, and its
// answer is the one replayed from then on.
func TestDuplicateNeverReadsUncommitted(t *testing.T) {
	t.Parallel()
	cfg := mysqltest.Config(t)
	cfg.Params = map[string]string{"tx_isolation": "'READ-UNCOMMITTED'"}
	s, db := newStoreFrom(t, cfg, 4)
	recorded, rollback := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	f := newTxFixtureOn(t, s, db, func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if runs.Add(1) > 1 {
			return charge(ctx, f, &testingv1.DoRequest{Payload: "second"})
		}
		tx, err := f.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+f.ledger+" (payload) VALUES ('first')"); err != nil {
			return nil, err
		}
		if err := f.store.CompleteTx(ctx, tx, &testingv1.DoResponse{Payload: "first"}); err != nil {
			return nil, err
		}
		close(recorded)
		<-rollback
		_ = tx.Rollback()
		return nil, status.Error(codes.Unavailable, "rolled back")
	})
	ctx := keyed(t.Context(), "k")
	first := make(chan error, 1)
	go func() {
		_, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "p"})
		first <- err
	}()
	<-recorded
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	var header metadata.MD
	resp, err := f.client.Do(dctx, &testingv1.DoRequest{Payload: "p"}, grpc.Header(&header))
	cancel()
	if err == nil {
		t.Fatalf("duplicate while the transaction is open: %v, replayed=%v; want in use, not the uncommitted answer", resp, replayed(header, nil))
	}
	testkit.WantReason(t, err, codes.Aborted, "IDEMPOTENCY_KEY_IN_USE")
	close(rollback)
	if err := <-first; status.Code(err) != codes.Unavailable {
		t.Fatalf("first call: %v, want its UNAVAILABLE", err)
	}
	for i := range 2 {
		header = nil
		resp, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "p"}, grpc.Header(&header))
		if err != nil || resp.GetPayload() != "second" || replayed(header, nil) != (i > 0) {
			t.Fatalf("call %d after the rollback: %v, %v, replayed=%v; want the second run's answer", i, resp, err, replayed(header, nil))
		}
	}
	if n, m := f.ledgerRows(t, "first"), f.ledgerRows(t, "second"); n != 0 || m != 1 {
		t.Fatalf("ledger rows: %d first, %d second; want 0 and 1", n, m)
	}
}
