package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// Sweep deletes one batch of expired rows ([WithSweepBatch], oldest first)
// and returns how many it deleted. It lists the batch with a plain SELECT
// through the expires_at index, which takes no lock, and deletes the rows
// listed that are still expired with one DELETE through their primary
// keys, in a READ COMMITTED transaction (no gap locks), which locks those
// rows and no other: it does not wait for a transaction that holds a live
// row (a handler's, after CompleteTx), and any number of servers and cron
// jobs may sweep at once. A row whose lease or retention ran out already counts as absent
// to every step; sweeping only reclaims its space. Call it in a loop until
// it returns fewer rows than the batch to clear a backlog (servers
// sweeping the same rows at once delete each row once, and may each
// count fewer).
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	n, err := s.sweep(ctx)
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: sweep %s: %w", s.table, err)
	}
	return n, nil
}

func (s *Store) sweep(ctx context.Context) (int64, error) {
	st, err := s.stmts.stmt(ctx, s.sql.expired)
	if err != nil {
		return 0, err
	}
	rows, err := st.QueryContext(ctx, s.cfg.sweepBatch)
	if err != nil {
		return 0, err
	}
	var keys []any
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			_ = rows.Close()
			return 0, err
		}
		keys = append(keys, k)
	}
	if err := rows.Close(); err != nil {
		return 0, err
	}
	if len(keys) == 0 {
		return 0, rows.Err()
	}
	q := s.sql.sweepPrefix + strings.Repeat("?, ", len(keys)-1) + "?)"
	for attempt := 0; ; attempt++ {
		n, err := s.deleteExpired(ctx, q, keys)
		if err == nil || !isDeadlock(err) || attempt == deadlockRetries {
			return n, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return 0, err
		}
	}
}

// deleteExpired runs q, the DELETE of the keys listed, in a READ
// COMMITTED transaction of its own.
func (s *Store) deleteExpired(ctx context.Context, q string, keys []any) (int64, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, q, keys...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// sweepLoop runs until ctx ends: every interval (with jitter), batches
// until one comes back short or the next run is due.
func (s *Store) sweepLoop(ctx context.Context) {
	defer s.sweeping.Done()
	sqlcore.SweepLoop(ctx, s.cfg.sweepInterval, s.cfg.sweepBatch, s.Sweep, s.cfg.sweepReport)
}
