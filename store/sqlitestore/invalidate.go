package sqlitestore

import (
	"context"
	"fmt"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// Invalidations implements [store.Invalidator.Invalidations] with the
// table's purge log (see [Schema]): [Store.Purge] writes one row per key
// it deletes, in the same transaction as the DELETE, and each
// subscription reads the log's last id when it subscribes, then polls the
// rows after it every interval ([WithInvalidationInterval], one second by
// default) with one read through the log's primary key, which no writer
// waits for. A purge by any Store on the file, in this process or
// another, therefore reaches every subscription within one interval and
// a read after its commit. The poll holds no connection between reads.
//
// The log's ids are contiguous and committed in order (each purge takes
// the next one under SQLite's write lock), so a poll that fails (the file
// unreadable) loses nothing: the next reads on from where it stopped. A
// purge deletes the log's rows older than an hour: a subscription that
// has not read for that long finds ids missing and delivers an
// Invalidation with All set, as it does when the log was emptied by hand.
// It returns an error when it cannot read the log (run [Store.Migrate]
// first). The channel is closed once ctx is done, or the store closed.
func (s *Store) Invalidations(ctx context.Context) (<-chan store.Invalidation, error) {
	f := sqlcore.PurgeFeed{
		Interval: s.cfg.invalidationInterval,
		Life:     s.life,
		Last: func(ctx context.Context) (int64, error) {
			var last int64
			err := s.queryRow(ctx, s.lsql.last, nil, &last)
			return last, err
		},
		From: s.logFrom,
	}
	ch, err := f.Subscribe(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: read the purge log of %s: %w", s.table, err)
	}
	return ch, nil
}

// logFrom reads up to n rows of the purge log from id on.
func (s *Store) logFrom(ctx context.Context, id int64, n int) ([]sqlcore.LogRow, error) {
	rows, err := s.query(ctx, s.lsql.from, id, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []sqlcore.LogRow
	for rows.Next() {
		var r sqlcore.LogRow
		if err := rows.Scan(&r.ID, &r.Key); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// purgeLogged deletes the entry Purge read (the key's live row, with the
// token and state it was read with, abandoned or not as it was) and, when it did, logs the purge in
// the same transaction and trims the log's old rows. It returns the rows
// it deleted: 0 or 1. Its statements are not prepared: the transaction
// holds a connection of the pool, and a preparation would wait for
// another (purges are rare).
func (s *Store) purgeLogged(ctx context.Context, key, token []byte, state int64, abandoned bool) (int64, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context) error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		res, err := tx.ExecContext(ctx, s.isql.purge, key, token, state, abandoned)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		var id int64
		if err := tx.QueryRowContext(ctx, s.lsql.insert, key).Scan(&id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.lsql.trim, sqlcore.PurgeLogRetention.Milliseconds(), id, sqlcore.PurgeLogTrim); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
