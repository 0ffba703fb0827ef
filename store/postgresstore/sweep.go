package postgresstore

import (
	"context"
	"fmt"

	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// Sweep deletes one batch of expired rows ([WithSweepBatch], oldest first)
// and returns how many it deleted. Rows other transactions hold are
// skipped (FOR UPDATE SKIP LOCKED), so any number of servers and cron jobs
// may sweep at once. A row whose lease or retention ran out already counts
// as absent to every step; sweeping only reclaims its space. Call it in a
// loop until it returns fewer rows than the batch to clear a backlog.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	tag, err := s.exec(ctx, s.sql.sweep, s.cfg.sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("postgresstore: sweep %s: %w", s.table, err)
	}
	return tag.RowsAffected(), nil
}

// sweepLoop runs until ctx ends: every interval (with jitter), batches
// until one comes back short or the next run is due.
func (s *Store) sweepLoop(ctx context.Context) {
	defer s.sweeping.Done()
	sqlcore.SweepLoop(ctx, s.cfg.sweepInterval, s.cfg.sweepBatch, s.Sweep, s.cfg.sweepReport)
}
