package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// CompleteTx records resp as the outcome of the call whose claim ctx (the
// handler's context) carries, inside tx, the handler's own transaction on
// the store's database file: exactly what the interceptor would have
// stored (see [idempotency.NewTxOutcome]). Call it after the
// transaction's side effects and before its commit; then commit, and
// return resp.
//
// It is one UPDATE of the key's row, fenced by the claim's token. When
// the claim was lost (its lease ran out, or another server took the key
// over) it changes nothing and returns an error matching
// [store.ErrLeaseLost], and the handler must roll back. Any other error
// means nothing was recorded either, and the handler rolls back the same
// way: an error saying so when tx does not see the store's table (another
// database file). On success it tells the interceptor, which then makes
// no store call for the outcome. If the commit then fails, return a
// retryable error (UNAVAILABLE): the interceptor releases the claim, which
// frees the key when nothing committed, and leaves the record in place
// when the commit landed after all, so a retry replays it and the handler
// never runs twice.
//
// SQLite lets one transaction write at a time: from its first write (from
// its BEGIN, on a pool of [Open], whose transactions begin IMMEDIATE) to
// its commit, tx holds the database's write lock, and every other write
// waits for it, in this process and in the others on the file: the
// renewal of the call's lease, other calls' claims and completions, the
// sweeper. Keep the transaction short. A duplicate of the call, whose
// claim begins with a read, is answered at once with the claim in flight.
// It returns [idempotency.ErrNoClaim] when ctx carries no claim (the call
// had no key, or the method is not deduplicated); the handler then
// commits without a record, as it would without this store.
func (s *Store) CompleteTx(ctx context.Context, tx *sql.Tx, resp proto.Message) error {
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
func (s *Store) CompleteErrorTx(ctx context.Context, tx *sql.Tx, herr error) error {
	if herr == nil {
		return errors.New("sqlitestore: CompleteErrorTx needs an error; use CompleteTx for a response")
	}
	return s.completeTx(ctx, tx, nil, herr)
}

func (s *Store) completeTx(ctx context.Context, tx *sql.Tx, resp proto.Message, herr error) error {
	o, err := idempotency.NewTxOutcome(ctx, resp, herr)
	if err != nil {
		return err
	}
	ms, err := millis("retention", o.Retention)
	if err != nil {
		return err
	}
	data := o.Data
	if data == nil {
		data = []byte{}
	}
	if ctx.Err() != nil {
		return s.fail("complete in transaction", o.StoreKey, sqlcore.Ended(ctx))
	}
	res, err := s.execTx(ctx, tx, s.sql.completeTx, []byte(o.StoreKey), []byte(o.Token), data, ms)
	if err != nil {
		if ctx.Err() != nil {
			return s.fail("complete in transaction", o.StoreKey, sqlcore.Ended(ctx))
		}
		return s.txFailed(o.StoreKey, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return s.notCompleted(ctx, tx, o.StoreKey, o.Token)
	}
	o.Recorded()
	return nil
}

// execTx runs q in tx, prepared on the store's pool when tx is one of its
// transactions (database/sql then prepares it on tx's connection the
// first time), and as it is otherwise: a statement prepared on one
// *sql.DB cannot run in a transaction of another.
func (s *Store) execTx(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	if st, err := s.stmts.stmt(ctx, q); err == nil {
		res, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...)
		if err == nil || !strings.Contains(err.Error(), "statement from different database") {
			return res, err
		}
	}
	return tx.ExecContext(ctx, q, args...)
}

// txFailed wraps the error of CompleteTx's UPDATE, saying what it means
// when the transaction does not see the store's table.
func (s *Store) txFailed(key string, err error) error {
	if isNoSuchTable(err) {
		return fmt.Errorf("sqlitestore: complete in transaction %x: the transaction does not see the store's table %s: it runs on another database file, or the table was not migrated: %w", key, s.table, err)
	}
	return s.fail("complete in transaction", key, err)
}

// diagnoseTimeout bounds the store's own look at a claim that CompleteTx
// did not find: the handler's transaction may hold the last connection of
// the store's pool.
const diagnoseTimeout = 500 * time.Millisecond

// mainFile is the path of the file of a connection's main database.
const mainFile = "SELECT file FROM pragma_database_list WHERE name = 'main'"

// notCompleted returns the error of a CompleteTx whose UPDATE changed no
// row. Most often the claim was lost: [store.ErrLeaseLost]. But a
// transaction on another database file, which holds a table of the same
// name, changes none either, and a retry would fail the same way: the
// store then looks at its own table through its own pool, and when the
// claim is still there, live and in flight, and tx's file is another, the
// error says so. When the store cannot tell (its pool has no connection
// free and may open none, or does not answer within diagnoseTimeout), the
// claim counts as lost.
func (s *Store) notCompleted(ctx context.Context, tx *sql.Tx, key, token string) error {
	lost := fmt.Errorf("sqlitestore: complete in transaction %x in %s: %w", key, s.table, store.ErrLeaseLost)
	if st := s.db.Stats(); st.Idle == 0 && st.MaxOpenConnections > 0 && st.OpenConnections >= st.MaxOpenConnections {
		return lost // no connection to look with; do not wait for one
	}
	dctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	var file, txFile string
	if err := s.db.QueryRowContext(dctx, s.sql.owned, []byte(key), []byte(token)).Scan(new(int64)); err != nil {
		return lost
	}
	if err := s.db.QueryRowContext(dctx, mainFile).Scan(&file); err != nil {
		return lost
	}
	if err := tx.QueryRowContext(ctx, mainFile).Scan(&txFile); err != nil || txFile == file {
		return lost
	}
	return fmt.Errorf("sqlitestore: complete in transaction %x: the transaction does not see the claim, which the store's table %s holds in flight: the transaction runs on database file %q, the store on %q", key, s.table, txFile, file)
}
