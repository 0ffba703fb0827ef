package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
)

// A connection at READ UNCOMMITTED reads the rows of transactions that may
// still roll back: the outcome a handler's transaction recorded with
// CompleteTx is there before its commit. The claim's read is the one step
// that answers from a row it read without a lock (a replay), so it reads
// the session's isolation with the row, and reads a row found at READ
// UNCOMMITTED again in a READ COMMITTED transaction. The pool's
// connections and the users' own statements keep their isolation.

// The variable that holds the session's isolation level, as the server
// names it: transaction_isolation on MySQL (5.7.20 and later) and MariaDB
// 11.1 and later, tx_isolation on MariaDB before 11.1 (MySQL 8 removed
// it).
const (
	isolationUnknown     int32 = iota
	isolationTransaction       // transaction_isolation
	isolationTx                // tx_isolation
)

// errUnknownVariable is ER_UNKNOWN_SYSTEM_VARIABLE.
const errUnknownVariable = 1193

// readUncommitted is the isolation level, as the server writes it, whose
// reads see uncommitted rows.
const readUncommitted = "READ-UNCOMMITTED"

// readSQL returns the claim's read statement for the server's name of the
// isolation variable, asking the server which it has the first time (or
// in Migrate).
func (s *Store) readSQL(ctx context.Context) (string, error) {
	v, err := s.isolationVariable(ctx)
	switch {
	case err != nil:
		return "", err
	case v == isolationTx:
		return s.sql.readTx, nil
	}
	return s.sql.read, nil
}

// isolationVariable returns which variable holds the session's isolation
// level on the server (isolationTransaction or isolationTx), asking the
// server the first time.
func (s *Store) isolationVariable(ctx context.Context) (int32, error) {
	if v := s.isolationVar.Load(); v != isolationUnknown {
		return v, nil
	}
	err := s.db.QueryRowContext(ctx, "SELECT @@session.transaction_isolation").Scan(new(string))
	switch {
	case err == nil:
		s.isolationVar.Store(isolationTransaction)
		return isolationTransaction, nil
	case mysqlErr(err) == errUnknownVariable:
		s.isolationVar.Store(isolationTx)
		return isolationTx, nil
	}
	return isolationUnknown, err
}

// read is the claim's read of key's row into r, none of it uncommitted: a
// row read on a connection at READ UNCOMMITTED is read again in a READ
// COMMITTED transaction, which sees the row as the last commit left it
// and, being a consistent read, waits for no lock.
func (s *Store) read(ctx context.Context, key string, r *claimRow) (found bool, err error) {
	q, err := s.readSQL(ctx)
	if err != nil {
		return false, err
	}
	var level string
	args, dest := []any{[]byte(key)}, []any{&r.state, &r.fp, &r.data, &r.live, &level, &r.token, &r.attempt}
	found, err = s.queryRow(ctx, q, args, dest...)
	if err != nil || !found || level != readUncommitted {
		return found, err
	}
	return s.queryRowCommitted(ctx, q, args, dest...)
}

// queryRowCommitted is queryRow in a read-only READ COMMITTED transaction
// of its own.
func (s *Store) queryRowCommitted(ctx context.Context, q string, args []any, dest ...any) (found bool, err error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted, ReadOnly: true})
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }() // after the commit, a no-op
	var row *sql.Row
	if st, ok := s.stmts.cached(q); ok {
		row = tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	} else {
		row = tx.QueryRowContext(ctx, q, args...)
	}
	err = row.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	} else if err == nil {
		found = true
	}
	if err != nil {
		return false, err
	}
	return found, tx.Commit()
}
