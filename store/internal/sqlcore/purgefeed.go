package sqlcore

import (
	"context"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// The purge log of the SQL stores without notifications (MySQL, SQLite):
// a table beside the records table, one row per purged key, written in
// the purge's own transaction. Its ids are contiguous and committed in
// order (each purge takes the next id under a lock that the previous one
// held until its commit: SQLite's write lock, a row lock on MySQL), so a
// reader that has seen every id up to n knows that a later commit has an
// id above n, and that a missing id is a row trimmed before it read it.
const (
	// PurgeLogRetention is how long a row of a purge log is kept: a purge
	// deletes the rows older than this, so a subscriber that has not read
	// the log for that long (its database unreachable) finds ids missing,
	// and sends All.
	PurgeLogRetention = time.Hour
	// PurgeLogTrim bounds how many old rows of the log one purge deletes.
	PurgeLogTrim = 1000
)

// feedBatch is how many rows of the log one poll reads at most; a poll
// that reads a full batch reads again at once.
const feedBatch = 256

// LogRow is one row of a purge log: its id and the key it purged.
type LogRow struct {
	ID  int64
	Key []byte
}

// PurgeFeed polls a store's purge log for one subscription of
// [store.Invalidator.Invalidations].
type PurgeFeed struct {
	// Interval is the time between the end of a poll and the next.
	Interval time.Duration
	// Life is the store's: when it ends (the store closed), the
	// subscription ends too. Nil for none.
	Life context.Context
	// Last returns the largest id of the log (0 for an empty log), as
	// committed: no uncommitted row.
	Last func(ctx context.Context) (int64, error)
	// From returns the committed rows of the log whose id is id or more,
	// in id order, at most n of them.
	From func(ctx context.Context, id int64, n int) ([]LogRow, error)
}

// Subscribe reads the log's last id, so that every purge committed after
// it returns is delivered, and polls the log from there in a goroutine of
// its own until ctx or Life is done, when it closes the channel. It returns an
// error, and no channel, when it cannot read the log.
//
// A poll that fails (the database unreachable) is tried again at the next
// interval: the log keeps the rows meanwhile, so nothing is lost unless
// they were trimmed ([PurgeLogRetention]), which the next poll that reads
// sees (an id missing after the last one delivered) and answers with an
// Invalidation with All set. A log whose rows are all gone, the last one
// delivered included (emptied or made anew by hand), is answered with All
// too.
func (f PurgeFeed) Subscribe(ctx context.Context) (<-chan store.Invalidation, error) {
	ctx, cancel := context.WithCancel(ctx)
	stop := func() bool { return false }
	if f.Life != nil {
		stop = context.AfterFunc(f.Life, cancel)
	}
	end := func() { stop(); cancel() }
	cursor, err := f.Last(ctx)
	if err != nil {
		end()
		return nil, err
	}
	out := make(chan store.Invalidation)
	go func() {
		defer close(out)
		defer end()
		f.follow(ctx, cursor, out)
	}()
	return out, nil
}

// follow polls the log after cursor every interval, and delivers what it
// reads to out, until ctx is done.
func (f PurgeFeed) follow(ctx context.Context, cursor int64, out chan<- store.Invalidation) {
	every(ctx, func() time.Duration { return f.Interval }, func() bool {
		for more := true; more; {
			var invs []store.Invalidation
			cursor, invs, more = f.poll(ctx, cursor)
			for _, inv := range invs {
				select {
				case out <- inv:
				case <-ctx.Done():
					return false
				}
			}
		}
		return true
	})
}

// poll reads the rows of the log from cursor, the last id delivered, and
// returns the new cursor, what to deliver, and whether it read a full
// batch (more may follow).
func (f PurgeFeed) poll(ctx context.Context, cursor int64) (int64, []store.Invalidation, bool) {
	rows, err := f.From(ctx, cursor, feedBatch+1)
	if err != nil {
		return cursor, nil, false // read again at the next interval
	}
	full := len(rows) > feedBatch
	if len(rows) == 0 {
		if cursor == 0 {
			return 0, nil, false
		}
		// The cursor's row is never trimmed while it is the last: the
		// log was emptied or made anew.
		last, err := f.Last(ctx)
		if err != nil {
			return cursor, nil, false
		}
		return last, []store.Invalidation{{All: true}}, false
	}
	var invs []store.Invalidation
	next := cursor + 1
	for _, r := range rows {
		switch {
		case r.ID == cursor:
			continue // delivered already
		case r.ID != next: // trimmed before this subscriber read it
			return rows[len(rows)-1].ID, []store.Invalidation{{All: true}}, full
		}
		invs = append(invs, store.Invalidation{Key: string(r.Key)})
		next++
	}
	return next - 1, invs, full
}
