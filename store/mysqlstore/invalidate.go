package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// Invalidations implements [store.Invalidator.Invalidations] with the
// table's purge log ([PurgeLog]): [Store.Purge] writes one row per key it
// deletes, in the same transaction as the DELETE, and each subscription
// reads the log's last id when it subscribes, then polls the rows after
// it every interval ([WithInvalidationInterval], one second by default)
// with one SELECT through the log's primary key, a consistent read that
// takes no lock (and usually reads no row). A purge by any server on the
// table therefore reaches every subscription within one interval and a
// round trip after its commit. A subscription holds no connection
// between polls.
//
// The log's ids are contiguous and committed in order (each purge locks
// the log's head row until its commit), so a poll that fails (the
// database unreachable) loses nothing: the next reads on from where it
// stopped. A purge deletes the log's rows older than an hour: a
// subscription that has not read for that long finds ids missing and
// delivers an Invalidation with All set, as it does when the log was
// emptied by hand. It returns an error when it cannot read the log (run
// [Store.Migrate] first). The channel is closed once ctx is done.
func (s *Store) Invalidations(ctx context.Context) (<-chan store.Invalidation, error) {
	f := sqlcore.PurgeFeed{Interval: s.cfg.invalidationInterval, Life: s.life, Last: s.logLast, From: s.logFrom}
	ch, err := f.Subscribe(ctx)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: read the purge log of %s: %w", s.table, err)
	}
	return ch, nil
}

// logLast reads the log's largest committed id, in a read-only READ
// COMMITTED transaction (a session at READ UNCOMMITTED would read a
// purge's id before its commit).
func (s *Store) logLast(ctx context.Context) (int64, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted, ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	var last int64
	if err := tx.QueryRowContext(ctx, s.lsql.last).Scan(&last); err != nil {
		return 0, err
	}
	return last, tx.Commit()
}

// logFrom reads up to n committed rows of the log from id on: in
// autocommit, and again in a read-only READ COMMITTED transaction when the
// session read them at READ UNCOMMITTED.
func (s *Store) logFrom(ctx context.Context, id int64, n int) ([]sqlcore.LogRow, error) {
	v, err := s.isolationVariable(ctx)
	if err != nil {
		return nil, err
	}
	q := s.lsql.from
	if v == isolationTx {
		q = s.lsql.fromTx
	}
	st, err := s.stmts.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	rows, uncommitted, err := scanLog(st.QueryContext(ctx, id, n))
	if err != nil || !uncommitted {
		return rows, err
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	if rows, _, err = scanLog(tx.StmtContext(ctx, st).QueryContext(ctx, id, n)); err != nil {
		return nil, err
	}
	return rows, tx.Commit()
}

// scanLog reads the rows of a query of the log, and whether they were
// read at READ UNCOMMITTED.
func scanLog(rows *sql.Rows, err error) (out []sqlcore.LogRow, uncommitted bool, _ error) {
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r     sqlcore.LogRow
			level string
		)
		if err := rows.Scan(&r.ID, &r.Key, &level); err != nil {
			return nil, false, err
		}
		uncommitted = uncommitted || level == readUncommitted
		out = append(out, r)
	}
	return out, uncommitted, rows.Err()
}

// purgeLogged deletes the entry Purge read (the key's live row, with the
// token and state it was read with) and, when it did, logs the purge in
// the same READ COMMITTED transaction: it locks the log's head, takes the
// largest id plus one, and deletes the log's rows older than an hour. It
// returns the rows it deleted: 0 or 1. The head's lock is taken after the
// record's, as by every purge, and held to the commit.
func (s *Store) purgeLogged(ctx context.Context, key, token []byte, state int64) (int64, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := s.execTx(ctx, tx, s.isql.purge, key, token, state)
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, err
	}
	if _, err := s.execTx(ctx, tx, s.lsql.head); err != nil {
		return 0, err
	}
	var last int64
	if err := tx.QueryRowContext(ctx, s.lsql.next).Scan(&last); err != nil {
		return 0, err
	}
	if _, err := s.execTx(ctx, tx, s.lsql.insert, last+1, key); err != nil {
		return 0, err
	}
	if _, err := s.execTx(ctx, tx, s.lsql.trim, sqlcore.PurgeLogRetention.Microseconds(), last+1, sqlcore.PurgeLogTrim); err != nil {
		return 0, err
	}
	return 1, tx.Commit()
}
