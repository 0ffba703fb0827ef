package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// Store is a [store.Store] and a [store.Inspector] on a SQLite database
// file, through database/sql and modernc.org/sqlite. A replay, or a
// duplicate of a call in flight, is one read statement; a new claim a read
// and one write statement; Complete, Extend and Abandon one statement
// each. It is safe for concurrent use, and several processes may share
// the file (see the package documentation).
type Store struct {
	db    *sql.DB
	table string // quoted
	sql   statements
	isql  inspectStatements
	lsql  logStatements
	cfg   config

	// gate lets one of the store's write statements run at a time in
	// this process (see Store.write).
	gate chan struct{}

	stmts prepared

	stop      context.CancelFunc
	life      context.Context // ends with Close
	sweeping  sync.WaitGroup
	closeOnce sync.Once
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.Inspector   = (*Store)(nil)
	_ store.Invalidator = (*Store)(nil)
)

// New returns a Store on db, a pool of the modernc.org/sqlite driver (see
// [Open], which sets it up as the store needs), with its rows in the
// table [WithTable] names, and starts its sweeper ([WithSweepInterval]).
// The caller owns db and closes it after [Store.Close]. The table must
// exist before the first call: run [Store.Migrate] at start-up, or apply
// [Schema] with your own migration tool. New makes no connection; it
// panics when an option is invalid.
func New(db *sql.DB, opts ...Option) *Store {
	c := newConfig(opts)
	if c.err != nil {
		panic(c.err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t := quoteTable(c.table)
	s := &Store{db: db, table: t, sql: newStatements(t), isql: newInspectStatements(t), lsql: newLogStatements(quoteTable(logTable(c.table))), cfg: c, gate: make(chan struct{}, 1), stmts: prepared{db: db}, stop: stop, life: ctx}
	if c.sweepInterval > 0 {
		s.sweeping.Add(1)
		go s.sweepLoop(ctx)
	}
	return s
}

// Close stops the sweeper, waits for a sweep under way to end, and closes
// the statements the store prepared on db. It does not close db. It
// always returns nil, and is safe to call more than once; a Store used
// after Close prepares its statements again.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.sweeping.Wait()
		s.stmts.close()
	})
	return nil
}

// Claim implements [store.Store.Claim]. It first reads the key's live row
// with a plain SELECT, a read that takes no lock a writer waits for: a
// completed row, an in-flight one, and an abandoned one it may not take
// over are returned as read, so a replay and a duplicate cost one read and
// never wait for the write lock. A key with no live row, or an abandoned
// row that opts.TakeOver lets it take over, is claimed by one statement,
// INSERT … ON CONFLICT DO UPDATE … RETURNING, which inserts the row, takes
// over an expired or abandoned one, or returns the row that another claim
// wrote since the read: that statement decides, under SQLite's write lock,
// so of concurrent claims of one key exactly one wins, in one process or
// many.
//
// When the statement fails, Claim releases the claim, fenced by its fresh
// token, in case it landed all the same (a failure reported at the end of
// the statement, after its commit), or abandons it when the claim may
// have taken over an abandoned entry, whose handler may have run.
func (s *Store) Claim(ctx context.Context, key string, fingerprint []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	ms, err := millis("lease", lease)
	if err != nil {
		return store.ClaimResult{}, err
	}
	keep, err := keepMillis(opts.Keep)
	if err != nil {
		return store.ClaimResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.ClaimResult{}, s.fail("claim", key, err)
	}
	if fingerprint == nil {
		fingerprint = []byte{}
	}
	var (
		state     int64
		abandoned bool
		fp, data  []byte
	)
	err = s.queryRow(ctx, s.sql.read, []any{[]byte(key)}, &state, &fp, &data, &abandoned)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return store.ClaimResult{}, s.fail("claim", key, err)
	case !abandoned || !opts.TakeOver || string(fp) != string(fingerprint):
		return s.existing(key, state, abandoned, fp, data)
	}
	token := store.NewToken()
	var (
		won     bool
		attempt int64
		prev    []byte
	)
	err = s.write(ctx, func(ctx context.Context) error {
		return s.queryRow(ctx, s.sql.claim, []any{[]byte(key), []byte(token), fingerprint, ms, keep, opts.TakeOver},
			&won, &state, &fp, &data, &abandoned, &attempt, &prev)
	})
	if err != nil {
		s.undoFailedClaim(ctx, key, token, opts.TakeOver)
		return store.ClaimResult{}, s.fail("claim", key, err)
	}
	if !won {
		return s.existing(key, state, abandoned, fp, data)
	}
	c := store.ClaimResult{Token: token, Attempt: int(attempt)}
	if prev != nil {
		c.Previous, _ = store.TokenTime(string(prev))
	}
	return c, nil
}

// existing returns the entry of a live row as a claim that lost sees it.
func (s *Store) existing(key string, state int64, abandoned bool, fp, data []byte) (store.ClaimResult, error) {
	e := store.Entry{Fingerprint: fp}
	switch {
	case state == stateInFlight && abandoned:
		e.State = store.StateAbandoned
	case state == stateInFlight:
		e.State = store.StateInFlight
	case state == stateCompleted:
		e.State = store.StateCompleted
		e.Data = data
		if e.Data == nil {
			e.Data = []byte{}
		}
	default:
		return store.ClaimResult{}, fmt.Errorf("sqlitestore: claim %x in %s: unknown state %d: %w", key, s.table, state, store.ErrCorrupt)
	}
	if e.Fingerprint == nil {
		e.Fingerprint = []byte{}
	}
	return store.ClaimResult{Existing: e}, nil
}

// undoFailedClaim undoes the claim of token, if it landed: it releases
// it, or abandons it when the claim may have taken over an abandoned
// entry. It is best effort: its error is dropped, since the claim's own
// error is reported.
func (s *Store) undoFailedClaim(ctx context.Context, key, token string, takeOver bool) {
	undo := s.Release
	if takeOver {
		undo = s.Abandon
	}
	sqlcore.ReleaseFailedClaim(ctx, func(ctx context.Context) error { return undo(ctx, key, token) })
}

// Complete implements [store.Store.Complete] with one UPDATE fenced by the
// token and the row's life: an abandoned row its token still owns is
// completed too. Complete resent with the token that completed the row
// returns nil and changes nothing.
func (s *Store) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	ms, err := millis("retention", retention)
	if err != nil {
		return err
	}
	if data == nil {
		data = []byte{}
	}
	return s.fenced(ctx, "complete", key, s.sql.complete, []byte(key), []byte(token), data, ms)
}

// Extend implements [store.Store.Extend] with one UPDATE fenced by the
// token, the in-flight state and the lease: an abandoned row is refused.
// A row claimed with a keep keeps it beyond the new lease.
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	ms, err := millis("lease", lease)
	if err != nil {
		return err
	}
	return s.fenced(ctx, "extend", key, s.sql.extend, []byte(key), []byte(token), ms)
}

// fenced runs q, an UPDATE that changes the key's row only while the token
// owns it; SQLite counts the rows it matched, changed or not, so a row
// left as it was (a resent Complete) counts.
func (s *Store) fenced(ctx context.Context, op, key, q string, args ...any) error {
	if err := ctx.Err(); err != nil {
		return s.fail(op, key, err)
	}
	n, err := s.exec(ctx, q, args...)
	if err != nil {
		return s.fail(op, key, err)
	}
	if n == 0 {
		return fmt.Errorf("sqlitestore: %s %x in %s: %w", op, key, s.table, store.ErrLeaseLost)
	}
	return nil
}

// Release implements [store.Store.Release] with one DELETE fenced by the
// token and the in-flight state. When it deletes nothing, one SELECT tells
// whether the key holds a live row (another owner's, or a completed one:
// ErrLeaseLost) or none (nothing left to release: nil).
func (s *Store) Release(ctx context.Context, key, token string) error {
	return s.orCheck(ctx, "release", key, s.sql.release, s.sql.live, false, []byte(key), []byte(token))
}

// Abandon implements [store.Store.Abandon] with one UPDATE fenced by the
// token, the in-flight state and the lease: it ends the lease of a row
// claimed with a keep now (the row lives its keep from now, as
// abandoned), and expires a row claimed without one, which is then absent
// as a deleted row is. When it changes nothing, one SELECT tells an
// abandoned row the token still owns (nil) from a lost one.
func (s *Store) Abandon(ctx context.Context, key, token string) error {
	return s.orCheck(ctx, "abandon", key, s.sql.abandon, s.sql.owned, true, []byte(key), []byte(token))
}

// orCheck runs q, and when it changed no row, check: a step succeeds when
// check finds a row and want is true, or finds none and want is false.
func (s *Store) orCheck(ctx context.Context, op, key, q, check string, want bool, args ...any) error {
	if err := ctx.Err(); err != nil {
		return s.fail(op, key, err)
	}
	n, err := s.exec(ctx, q, args...)
	if err != nil {
		return s.fail(op, key, err)
	}
	if n > 0 {
		return nil
	}
	err = s.queryRow(ctx, check, args, new(int64))
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return s.fail(op, key, err)
	}
	if found != want {
		return fmt.Errorf("sqlitestore: %s %x in %s: %w", op, key, s.table, store.ErrLeaseLost)
	}
	return nil
}

// exec runs the write statement q and returns how many rows it matched.
func (s *Store) exec(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context) error {
		st, err := s.stmts.stmt(ctx, q)
		if err != nil {
			return err
		}
		res, err := st.ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// write runs one write statement of the store, alone among the store's
// writes in this process. SQLite lets one connection write at a time:
// another that finds the write lock taken polls for it in its busy
// handler, sleeping a millisecond and then longer between tries, so many
// writers of one process that queue there wait far longer than the writes
// take. Queued on a channel instead, they hand the lock on within
// microseconds; the busy timeout still arbitrates with other processes and
// with the application's own transactions.
func (s *Store) write(ctx context.Context, f func(context.Context) error) error {
	if !s.cfg.ungated {
		select {
		case s.gate <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-s.gate }()
	}
	return f(ctx)
}

// fail wraps a database or context error of op.
func (s *Store) fail(op, key string, err error) error {
	return fmt.Errorf("sqlitestore: %s %x in %s: %w", op, key, s.table, err)
}

// millis returns d in whole milliseconds, rounded up, or an error for a
// duration that is not positive. Every positive duration, up to
// math.MaxInt64 (about 292 years, 9.2e15 ms), added to the clock and to a
// keep as long, fits in SQLite's 64-bit integers.
func millis(what string, d time.Duration) (int64, error) {
	n, ok := store.Units(d, time.Millisecond)
	if !ok {
		return 0, fmt.Errorf("sqlitestore: %s must be positive, got %v", what, d)
	}
	return n, nil
}

// keepMillis returns keep in whole milliseconds, rounded up: 0 for no
// keep, and an error for a negative one.
func keepMillis(keep time.Duration) (int64, error) {
	if keep == 0 {
		return 0, nil
	}
	return millis("keep", keep)
}
