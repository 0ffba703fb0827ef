package postgresstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store"
)

// CompleteTx records resp as the outcome of the call whose claim ctx (the
// handler's context) carries, inside tx, the handler's own transaction on
// the store's database: exactly what the interceptor would have stored
// (see [idempotency.NewTxOutcome]). Call it after the transaction's side
// effects and before its commit; then commit, and return resp.
//
// It is one UPDATE of the key's row, fenced by the claim's token: when the
// claim was lost (its lease ran out, or another server took the key over)
// it changes nothing and returns an error matching [store.ErrLeaseLost],
// and the handler must roll back. On success it tells the interceptor,
// which then makes no store call for the outcome. If the commit then fails,
// return a retryable error (UNAVAILABLE): the interceptor releases the
// claim, which frees the key when nothing committed, and leaves the record
// in place when the commit landed after all, so a retry replays it and the
// handler never runs twice.
//
// From the UPDATE to the end of tx, tx holds the row's lock: duplicates of
// the call, and the renewal of its lease, wait for the commit or rollback.
// It returns [idempotency.ErrNoClaim] when ctx carries no claim (the call
// had no key, or the method is not deduplicated); the handler then commits
// without a record, as it would without this store.
func (s *Store) CompleteTx(ctx context.Context, tx pgx.Tx, resp proto.Message) error {
	return s.completeTx(ctx, tx, resp, nil)
}

// CompleteErrorTx records the deterministic error herr as the outcome of
// the call whose claim ctx carries, inside tx, as [Store.CompleteTx] does
// for a response: for a handler whose refusal is a side effect of its own,
// such as a declined card written to the ledger and answered
// FAILED_PRECONDITION. herr must be a gRPC status with a code the
// interceptor stores (idempotency.WithStoredCodes); any other error is
// refused, since a retryable error must release the claim instead. After
// the commit, return herr.
func (s *Store) CompleteErrorTx(ctx context.Context, tx pgx.Tx, herr error) error {
	if herr == nil {
		return fmt.Errorf("postgresstore: CompleteErrorTx needs an error; use CompleteTx for a response")
	}
	return s.completeTx(ctx, tx, nil, herr)
}

func (s *Store) completeTx(ctx context.Context, tx pgx.Tx, resp proto.Message, herr error) error {
	o, err := idempotency.NewTxOutcome(ctx, resp, herr)
	if err != nil {
		return err
	}
	us, err := micros("retention", o.Retention)
	if err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, s.sql.completeTx, []byte(o.StoreKey), []byte(o.Token), o.Data, us)
	if err != nil {
		return s.fail("complete in transaction", o.StoreKey, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgresstore: complete in transaction %x in %s: %w", o.StoreKey, s.table, store.ErrLeaseLost)
	}
	o.Recorded()
	return nil
}
