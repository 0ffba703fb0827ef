package postgresstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// Store is a [store.Store] on PostgreSQL. Each method is one SQL
// statement: one atomic round trip. It is safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	table string // quoted, for messages
	sql   statements
	cfg   config

	// readCommitted is set once the store knows that its connections
	// default to a stricter isolation than READ COMMITTED: each step then
	// asks for READ COMMITTED (see isolation.go).
	readCommitted atomic.Bool

	stop      context.CancelFunc
	sweeping  sync.WaitGroup
	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// New returns a Store on pool, with its rows in the table [WithTable]
// names, and starts its sweeper ([WithSweepInterval]). The caller owns pool
// and closes it after [Store.Close]. The table must exist before the first
// call: run [Store.Migrate] at start-up, or apply [Schema] with your own
// migration tool. New panics when an option is invalid.
//
// Each step runs as one statement on a connection of pool, under READ
// COMMITTED: when the connections default to a stricter isolation, each
// step asks for READ COMMITTED in a transaction of its own, and the
// connections' default is left as it is (see Isolation in the package
// documentation). See the package documentation for PgBouncer.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	c := newConfig(opts)
	if c.err != nil {
		panic(c.err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Store{pool: pool, table: c.table.Sanitize(), sql: newStatements(c.table), cfg: c, stop: stop}
	if c.sweepInterval > 0 {
		s.sweeping.Add(1)
		go s.sweepLoop(ctx)
	}
	return s
}

// Close stops the sweeper and waits for a sweep under way to end. It does
// not close the pool. It always returns nil, and is safe to call more
// than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.sweeping.Wait()
	})
	return nil
}

// Claim implements [store.Store.Claim] with one statement on the key's
// row. It returns a live completed row as it reads it, writing nothing and
// taking no lock, so replays cost a read and never wait for one another.
// Otherwise its INSERT … ON CONFLICT … DO UPDATE … RETURNING creates the
// in-flight row, takes over one whose lease or retention has run out, or
// with opts.TakeOver an abandoned one with the same fingerprint, or
// returns the live row unchanged. Concurrent claims of one key that are
// not replays queue on its row lock, so exactly one wins.
//
// When the statement fails after it was sent, its claim may have landed
// all the same; Claim then releases it, fenced by the claim's fresh token,
// before it returns the error, so that no claim nobody owns blocks the key
// for a whole lease (see the package documentation). A claim that took an
// abandoned entry over (its row's attempt is above 1) is abandoned instead
// of released: the entry's first handler may have run, and releasing it
// would forget that; a claim with opts.TakeOver that found the key free
// made a fresh entry, and is released.
func (s *Store) Claim(ctx context.Context, key string, fingerprint []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	us, err := micros("lease", lease)
	if err != nil {
		return store.ClaimResult{}, err
	}
	keep, err := keepMicros(opts.Keep)
	if err != nil {
		return store.ClaimResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.ClaimResult{}, s.fail("claim", key, err)
	}
	token := store.NewToken()
	var (
		won, abandoned bool
		state          int16
		attempt        int32
		fp, data, prev []byte
	)
	err = s.queryRow(ctx, s.sql.claim, []any{[]byte(key), []byte(token), fingerprint, us, keep, opts.TakeOver},
		&won, &state, &fp, &data, &abandoned, &attempt, &prev)
	if err != nil {
		if mayHaveLanded(err) {
			s.undoFailedClaim(ctx, key, token, opts.TakeOver)
		}
		return store.ClaimResult{}, s.fail("claim", key, err)
	}
	if won {
		c := store.ClaimResult{Token: token, Attempt: int(attempt)}
		if prev != nil {
			c.Previous, _ = store.TokenTime(string(prev))
		}
		return c, nil
	}
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
		return store.ClaimResult{}, fmt.Errorf("postgresstore: claim %x in %s: unknown state %d: %w", key, s.table, state, store.ErrCorrupt)
	}
	return store.ClaimResult{Existing: e}, nil
}

// keepMicros returns keep in whole microseconds, rounded up: 0 for no
// keep, and an error for a negative one.
func keepMicros(keep time.Duration) (int64, error) {
	if keep == 0 {
		return 0, nil
	}
	return micros("keep", keep)
}

// mayHaveLanded reports whether a statement that failed with err may have
// committed all the same: it was sent, and PostgreSQL did not answer with
// an error (which rolls the statement back).
func mayHaveLanded(err error) bool {
	var pgErr *pgconn.PgError
	return !pgconn.SafeToRetry(err) && !errors.As(err, &pgErr)
}

// undoFailedClaim undoes the claim of token, if it landed: it releases
// it, or abandons it when the claim took over an abandoned entry (see
// [Store.Claim]). It is best effort: its error is dropped, since the
// claim's own error is reported.
func (s *Store) undoFailedClaim(ctx context.Context, key, token string, takeOver bool) {
	undo := s.Release
	if takeOver {
		undo = s.undoTakeOver
	}
	sqlcore.ReleaseFailedClaim(ctx, func(ctx context.Context) error { return undo(ctx, key, token) })
}

// undoTakeOver undoes a failed claim made with TakeOver: the row of token
// is released when it is attempt 1 (the claim found the key free, or
// expired, and made a fresh entry that no handler ran under), and
// abandoned otherwise (the claim took an abandoned entry over).
func (s *Store) undoTakeOver(ctx context.Context, key, token string) error {
	tag, err := s.exec(ctx, s.sql.releaseFresh, []byte(key), []byte(token))
	if err != nil || tag.RowsAffected() > 0 {
		return err
	}
	return s.Abandon(ctx, key, token)
}

// Complete implements [store.Store.Complete] with one UPDATE fenced by the
// token and the row's life: an abandoned row its token still owns is
// completed too. Complete resent with the token that completed the row
// returns nil and changes nothing.
func (s *Store) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	us, err := micros("retention", retention)
	if err != nil {
		return err
	}
	return s.fenced(ctx, "complete", s.sql.complete, []byte(key), []byte(token), data, us)
}

// Release implements [store.Store.Release] with one DELETE fenced by the
// token and the in-flight state. It returns nil when the key holds no live
// row: nothing is left to release.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return s.fail("release", key, err)
	}
	var ok bool
	if err := s.queryRow(ctx, s.sql.release, []any{[]byte(key), []byte(token)}, &ok); err != nil {
		return s.fail("release", key, err)
	}
	if !ok {
		return fmt.Errorf("postgresstore: release %x in %s: %w", key, s.table, store.ErrLeaseLost)
	}
	return nil
}

// Extend implements [store.Store.Extend] with one UPDATE fenced by the
// token, the in-flight state and the lease: an abandoned row is refused.
// A row claimed with a keep keeps it beyond the new lease.
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	us, err := micros("lease", lease)
	if err != nil {
		return err
	}
	return s.fenced(ctx, "extend", s.sql.extend, []byte(key), []byte(token), us)
}

// fenced runs an UPDATE that changes one row only while the token owns it.
func (s *Store) fenced(ctx context.Context, op, sql string, args ...any) error {
	key := args[0].([]byte)
	if err := ctx.Err(); err != nil {
		return s.fail(op, string(key), err)
	}
	tag, err := s.exec(ctx, sql, args...)
	if err != nil {
		return s.fail(op, string(key), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgresstore: %s %x in %s: %w", op, key, s.table, store.ErrLeaseLost)
	}
	return nil
}

// fail wraps a database or context error of op. An undefined column
// means a table of an earlier schema version, which the error says.
func (s *Store) fail(op, key string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42703" { // undefined_column
		return fmt.Errorf("postgresstore: %s %x in %s: the table is of an earlier schema version: run Migrate, or apply Schema, to upgrade it: %w", op, key, s.table, err)
	}
	return fmt.Errorf("postgresstore: %s %x in %s: %w", op, key, s.table, err)
}

// micros returns d in whole microseconds, rounded up, or an error for a
// duration that is not positive; every positive duration, up to
// math.MaxInt64, gives an interval PostgreSQL can add to its clock.
func micros(what string, d time.Duration) (int64, error) {
	n, ok := store.Units(d, time.Microsecond)
	if !ok {
		return 0, fmt.Errorf("postgresstore: %s must be positive, got %v", what, d)
	}
	return n, nil
}

// Abandon implements [store.Store.Abandon] with one statement fenced by
// the token and the in-flight state: it ends the lease of a row claimed
// with a keep now (the row lives its keep from now, as abandoned), and
// deletes a row claimed without one.
func (s *Store) Abandon(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return s.fail("abandon", key, err)
	}
	var ok bool
	if err := s.queryRow(ctx, s.sql.abandon, []any{[]byte(key), []byte(token)}, &ok); err != nil {
		return s.fail("abandon", key, err)
	}
	if !ok {
		return fmt.Errorf("postgresstore: abandon %x in %s: %w", key, s.table, store.ErrLeaseLost)
	}
	return nil
}
