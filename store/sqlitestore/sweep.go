package sqlitestore

import (
	"context"
	"fmt"

	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// Sweep deletes one batch of expired rows ([WithSweepBatch], oldest first)
// and returns how many it deleted. It is one DELETE under SQLite's write
// lock, so any number of processes may sweep one file at once: each row
// is deleted once, and a row taken over meanwhile is live again and kept.
// A row whose lease or retention ran out already counts as absent to
// every step; sweeping only reclaims its space. Call it in a loop until it
// returns fewer rows than the batch to clear a backlog.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	n, err := s.exec(ctx, s.sql.sweep, s.cfg.sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: sweep %s: %w", s.table, err)
	}
	return n, nil
}

// sweepLoop runs until ctx ends: every interval (with jitter), batches
// until one comes back short or the next run is due.
func (s *Store) sweepLoop(ctx context.Context) {
	defer s.sweeping.Done()
	sqlcore.SweepLoop(ctx, s.cfg.sweepInterval, s.cfg.sweepBatch, s.Sweep, s.cfg.sweepReport)
}
