package postgresstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The store's steps need READ COMMITTED; on connections that default to a
// stricter isolation, each runs in a READ COMMITTED transaction of its own
// (see Isolation in the package documentation).

// isSerializationFailure reports whether err is PostgreSQL's
// serialization_failure (SQLSTATE 40001).
func isSerializationFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40001"
}

// stricterThanReadCommitted reports whether level, a value of
// default_transaction_isolation, is stricter than READ COMMITTED
// (PostgreSQL runs READ UNCOMMITTED as READ COMMITTED).
func stricterThanReadCommitted(level string) bool {
	return level == "repeatable read" || level == "serializable"
}

// queryRow runs sql, a statement that returns one row, and scans the row
// into dest, under READ COMMITTED.
func (s *Store) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	if !s.readCommitted.Load() {
		err := s.pool.QueryRow(ctx, sql, args...).Scan(dest...)
		if !isSerializationFailure(err) {
			return err
		}
		s.readCommitted.Store(true)
	}
	_, err := s.inReadCommitted(ctx, sql, args, dest)
	return err
}

// exec runs sql under READ COMMITTED and returns its command tag.
func (s *Store) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if !s.readCommitted.Load() {
		tag, err := s.pool.Exec(ctx, sql, args...)
		if !isSerializationFailure(err) {
			return tag, err
		}
		s.readCommitted.Store(true)
	}
	return s.inReadCommitted(ctx, sql, args, nil)
}

// rollbackTimeout bounds the ROLLBACK of a step's transaction that failed.
const rollbackTimeout = time.Second

// inReadCommitted runs sql as the one statement of a READ COMMITTED
// transaction, in one round trip: BEGIN, the statement and COMMIT are sent
// together. With dest, it scans the statement's one row into dest;
// without, it returns its command tag. When the statement fails, the
// transaction is rolled back so that the connection goes back to the pool
// (pgxpool closes one left in a transaction).
func (s *Store) inReadCommitted(ctx context.Context, sql string, args, dest []any) (pgconn.CommandTag, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer conn.Release()
	var (
		b   pgx.Batch
		tag pgconn.CommandTag
	)
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	q := b.Queue(sql, args...)
	if dest != nil {
		q.QueryRow(func(row pgx.Row) error { return row.Scan(dest...) })
	} else {
		q.Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	}
	b.Queue("COMMIT")
	err = conn.SendBatch(ctx, &b).Close()
	if pc := conn.Conn().PgConn(); err != nil && !pc.IsClosed() && pc.TxStatus() != 'I' {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		_, _ = conn.Exec(rctx, "ROLLBACK")
		cancel()
	}
	return tag, err
}
