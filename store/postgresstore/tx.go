package postgresstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
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
// and the handler must roll back. Any other error means nothing was
// recorded either, and the handler rolls back the same way: in a
// REPEATABLE READ or SERIALIZABLE transaction, a serialization error when
// the row changed after the transaction's snapshot; and an error saying
// what is wrong when tx cannot see the claim's row (another database,
// another table found by its search_path, a snapshot taken before the
// claim): see the package documentation. On success it tells the interceptor,
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
	if ctx.Err() != nil {
		return s.fail("complete in transaction", o.StoreKey, sqlcore.Ended(ctx))
	}
	tag, err := tx.Exec(ctx, s.sql.completeTx, []byte(o.StoreKey), []byte(o.Token), o.Data, us)
	if err != nil {
		if ctx.Err() != nil {
			return s.fail("complete in transaction", o.StoreKey, sqlcore.Ended(ctx))
		}
		return s.txFailed(o.StoreKey, err)
	}
	if tag.RowsAffected() == 0 {
		return s.notCompleted(ctx, tx, o.StoreKey, o.Token)
	}
	o.Recorded()
	return nil
}

// txFailed wraps the error of CompleteTx's UPDATE, saying what it means
// when it is one that a transaction on the wrong database, or a stricter
// isolation, gets.
func (s *Store) txFailed(key string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42P01": // undefined_table
			return fmt.Errorf("postgresstore: complete in transaction %x: the transaction does not see the store's table %s: it runs on another database, or its search_path misses the table's schema: %w", key, s.table, err)
		case "40001": // serialization_failure
			return fmt.Errorf("postgresstore: complete in transaction %x in %s: the transaction's isolation refused the update, since the row changed after the transaction's snapshot (a duplicate's claim, a lease renewal); nothing is recorded: roll back and return a retryable error: %w", key, s.table, err)
		}
	}
	return s.fail("complete in transaction", key, err)
}

// diagnoseTimeout bounds the store's own look at a claim that CompleteTx
// did not find: the handler's transaction may hold the last connection of
// the store's pool.
const diagnoseTimeout = 500 * time.Millisecond

// notCompleted returns the error of a CompleteTx whose UPDATE changed no
// row. Most often the claim was lost: [store.ErrLeaseLost]. But a
// transaction that cannot see the claim's row changes none either: one on
// another database, one whose search_path finds another table of the same
// name, or one whose snapshot was taken before the claim. A retry would
// fail the same way, so the store looks at its own table through its own
// pool: when the claim is still there, live and in flight, the error says
// what is wrong instead. When the store cannot tell (its pool has no free
// connection, or does not answer within diagnoseTimeout), the claim counts
// as lost.
func (s *Store) notCompleted(ctx context.Context, tx pgx.Tx, key, token string) error {
	lost := fmt.Errorf("postgresstore: complete in transaction %x in %s: %w", key, s.table, store.ErrLeaseLost)
	var (
		held           bool
		db, txDB       string
		table, txTable *int64
	)
	if st := s.pool.Stat(); st.IdleConns() == 0 && st.TotalConns() >= st.MaxConns() {
		return lost // no connection to look with; do not wait for one
	}
	dctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	if err := s.queryRow(dctx, s.sql.held, []any{[]byte(key), []byte(token), s.table}, &held, &db, &table); err != nil || !held {
		return lost
	}
	prefix := fmt.Sprintf("postgresstore: complete in transaction %x: the transaction does not see the claim, which the store's table %s holds in flight", key, s.table)
	if err := tx.QueryRow(ctx, s.sql.whereAmI, s.table).Scan(&txDB, &txTable); err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	switch {
	case txDB != db:
		return fmt.Errorf("%s: the transaction runs on database %q, the store on %q", prefix, txDB, db)
	case txTable == nil || table == nil || *txTable != *table:
		return fmt.Errorf("%s: the transaction's search_path finds another table of that name; give it the store's search_path, or name the table with its schema (WithTable)", prefix)
	}
	return fmt.Errorf("%s: the transaction took its snapshot before the claim (REPEATABLE READ or SERIALIZABLE, begun before the call was claimed: begin it in the handler), or it runs on another server whose database and table have the same names", prefix)
}
