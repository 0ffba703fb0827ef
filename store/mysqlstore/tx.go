package mysqlstore

import (
	"context"
	"database/sql"
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
// the store's database: exactly what the interceptor would have stored
// (see [idempotency.NewTxOutcome]). Call it after the transaction's side
// effects and before its commit; then commit, and return resp.
//
// It is one UPDATE of the key's row, fenced by the claim's token (a
// locking read: it sees the claim whatever the transaction's isolation and
// snapshot). A claim whose lease ran out but whose entry is kept
// (abandoned, [store.ClaimOptions.Keep]) is completed all the same, as
// [Store.Complete] does, while nobody took it over. When the claim was
// lost (its lease ran out without Keep, or another server took the key
// over) it changes nothing and returns an error matching
// [store.ErrLeaseLost], and the handler must roll back. Any other error
// means nothing was recorded either, and the handler rolls back the same
// way: a deadlock (InnoDB has then rolled the whole transaction back), a
// lock wait timeout, and an error saying what is wrong when tx cannot see
// the claim's row (it runs on another database, or the table is missing
// there): see the package documentation. On success it tells the
// interceptor, which then makes no store call for the outcome. If the
// commit then fails, return a retryable error (UNAVAILABLE): the
// interceptor releases the claim, which frees the key when nothing
// committed, and leaves the record in place when the commit landed after
// all, so a retry replays it and the handler never runs twice.
//
// From the UPDATE to the end of tx, tx holds the row's lock: the renewal
// of the call's lease waits for the commit or rollback, while a duplicate
// of the call, whose claim is a plain read, is answered at once with the
// claim in flight (the interceptor's in-use answer, or its wait). It
// returns [idempotency.ErrNoClaim] when ctx carries no claim (the call had
// no key, or the method is not deduplicated); the handler then commits
// without a record, as it would without this store.
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
		return fmt.Errorf("mysqlstore: CompleteErrorTx needs an error; use CompleteTx for a response")
	}
	return s.completeTx(ctx, tx, nil, herr)
}

func (s *Store) completeTx(ctx context.Context, tx *sql.Tx, resp proto.Message, herr error) error {
	o, err := idempotency.NewTxOutcome(ctx, resp, herr)
	if err != nil {
		return err
	}
	us, err := micros("retention", o.Retention)
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
	res, err := s.execTx(ctx, tx, s.sql.completeTx, data, us, []byte(o.StoreKey), []byte(o.Token))
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

// execTx runs q in tx, on tx's connection and no other: the handler's
// transaction may hold the last connection of the pool. When the store
// has prepared q, database/sql runs it on tx's connection, preparing it
// there the first time (one round trip more, once per connection).
// Otherwise, and when tx belongs to another pool than the store's (the
// store's prepared statement cannot run there), q is sent as it is: one
// round trip with the DSN's interpolateParams, a preparation, an
// execution and a close without it; and the store prepares q in the
// background for the next calls.
func (s *Store) execTx(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	if st, ok := s.stmts.cached(q); ok {
		res, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...)
		if err == nil || !otherPool(err) {
			return res, err
		}
	} else {
		s.stmts.prepareLater(s.life, &s.sweeping, q)
	}
	return tx.ExecContext(ctx, q, args...)
}

// otherPool reports whether err is database/sql's refusal to run a
// statement prepared on one *sql.DB in a transaction of another.
func otherPool(err error) bool {
	return err != nil && strings.Contains(err.Error(), "statement from different database")
}

// txFailed wraps the error of CompleteTx's UPDATE, saying what it means
// when it is one that a transaction on the wrong database, or a deadlock,
// gets.
func (s *Store) txFailed(key string, err error) error {
	switch mysqlErr(err) {
	case errNoSuchTable:
		return fmt.Errorf("mysqlstore: complete in transaction %x: the transaction does not see the store's table %s: it runs on another database, or the table was not migrated: %w", key, s.table, err)
	case errDeadlock:
		return fmt.Errorf("mysqlstore: complete in transaction %x in %s: the transaction was chosen as a deadlock's victim and rolled back; nothing is recorded: return a retryable error: %w", key, s.table, err)
	}
	return s.fail("complete in transaction", key, err)
}

// diagnoseTimeout bounds the store's own look at a claim that CompleteTx
// did not find: the handler's transaction may hold the last connection of
// the store's pool.
const diagnoseTimeout = 500 * time.Millisecond

// notCompleted returns the error of a CompleteTx whose UPDATE changed no
// row. Most often the claim was lost: [store.ErrLeaseLost]. But a
// transaction on another database, which holds a table of the same name,
// changes none either, and a retry would fail the same way: the store then
// looks at its own table through its own pool, and when the claim is still
// there, live and in flight (or abandoned: CompleteTx completes an
// abandoned entry its token still owns), the error says what is wrong
// instead. When
// the store cannot tell (its pool has no connection free and may open
// none, or does not answer within diagnoseTimeout), the claim counts as
// lost.
func (s *Store) notCompleted(ctx context.Context, tx *sql.Tx, key, token string) error {
	lost := fmt.Errorf("mysqlstore: complete in transaction %x in %s: %w", key, s.table, store.ErrLeaseLost)
	if st := s.db.Stats(); st.Idle == 0 && st.MaxOpenConnections > 0 && st.OpenConnections >= st.MaxOpenConnections {
		return lost // no connection to look with; do not wait for one
	}
	dctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	if owned, err := s.queryRow(dctx, s.sql.owned, []any{[]byte(key), []byte(token)}, new(int64)); err != nil || !owned {
		return lost
	}
	var db, txDB sql.NullString
	if _, err := s.queryRow(dctx, s.sql.whereAmI, nil, &db); err != nil {
		return lost
	}
	prefix := fmt.Sprintf("mysqlstore: complete in transaction %x: the transaction does not see the claim, which the store's table %s holds in flight", key, s.table)
	if err := tx.QueryRowContext(ctx, s.sql.whereAmI).Scan(&txDB); err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	if txDB != db {
		return fmt.Errorf("%s: the transaction runs on database %q, the store on %q; name the table with its database (WithTable)", prefix, txDB.String, db.String)
	}
	return fmt.Errorf("%s: the transaction runs on another server whose database and table have the same names", prefix)
}
