package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"time"
)

// Sweep deletes one batch of expired rows ([WithSweepBatch], oldest first)
// and returns how many it deleted. It runs as one DELETE in a READ
// COMMITTED transaction of its own, which takes no gap locks and passes
// over a row that another transaction holds live (a handler's, after
// CompleteTx), so any number of servers and cron jobs may sweep at once. A
// row whose lease or retention ran out already counts as absent to every
// step; sweeping only reclaims its space. Call it in a loop until it
// returns fewer rows than the batch to clear a backlog.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	n, err := s.sweep(ctx)
	if err != nil {
		return 0, fmt.Errorf("mysqlstore: sweep %s: %w", s.table, err)
	}
	return n, nil
}

func (s *Store) sweep(ctx context.Context) (int64, error) {
	st, err := s.stmts.stmt(ctx, s.sql.sweep)
	if err != nil {
		return 0, err
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.StmtContext(ctx, st).ExecContext(ctx, s.cfg.sweepBatch)
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
	interval := s.cfg.sweepInterval
	t := time.NewTimer(jitter(interval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := time.Now().Add(interval)
		for ctx.Err() == nil && time.Now().Before(due) {
			n, err := s.Sweep(ctx)
			if ctx.Err() != nil {
				return
			}
			if s.cfg.sweepReport != nil {
				s.cfg.sweepReport(n, err)
			}
			if err != nil || n < int64(s.cfg.sweepBatch) {
				break
			}
		}
		t.Reset(jitter(interval))
	}
}

// jitter returns d plus up to 10% of random jitter.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}
