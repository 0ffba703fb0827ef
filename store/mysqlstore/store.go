package mysqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// Store is a [store.Store] on MySQL or MariaDB, through database/sql and
// github.com/go-sql-driver/mysql. A replay, or a duplicate of a call in
// flight, is one SELECT; a new claim a SELECT and an INSERT, and so is a
// take-over of an abandoned claim (a SELECT and an UPDATE); Complete,
// Release, Extend and Abandon one statement each. It is safe for
// concurrent use.
type Store struct {
	db    *sql.DB
	table string // quoted
	sql   statements
	isql  inspectStatements
	lsql  logStatements
	cfg   config
	stmts prepared

	// isolationVar names the variable of the session's isolation level on
	// this server, once known (see isolation.go).
	isolationVar atomic.Int32

	// maxPacket is the server's max_allowed_packet, once Migrate has read
	// it (see MaxRecordBytes).
	maxPacket atomic.Int64

	life      context.Context // ends with Close
	stop      context.CancelFunc
	sweeping  sync.WaitGroup // the sweeper, and statements prepared in the background
	closeOnce sync.Once
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.RecordLimiter = (*Store)(nil)
	_ store.Invalidator   = (*Store)(nil)
)

// New returns a Store on db, a pool opened with the MySQL driver
// (github.com/go-sql-driver/mysql), with its rows in the table
// [WithTable] names, and starts its sweeper ([WithSweepInterval]). The
// caller owns db and closes it after [Store.Close]. The table must exist
// before the first call: run [Store.Migrate] at start-up, or apply
// [Schema] with your own migration tool. New makes no connection; it
// panics when an option is invalid.
//
// db's connections must be in autocommit mode, the server's default
// (a DSN with autocommit=0 or init statements that turn it off would keep
// every step in a transaction that never commits; Migrate refuses such a
// pool). Any isolation level works (at READ UNCOMMITTED, a claim that
// finds a row reads it again in a READ COMMITTED transaction, so that it
// never replays an answer that may roll back), and any DSN parameters otherwise:
// clientFoundRows, interpolateParams and parseTime change nothing (see the
// package documentation).
func New(db *sql.DB, opts ...Option) *Store {
	c := newConfig(opts)
	if c.err != nil {
		panic(c.err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t := quoteTable(c.table)
	s := &Store{db: db, table: t, sql: newStatements(t), isql: newInspectStatements(t), lsql: newLogStatements(quoteTable(logTable(c.table))), cfg: c, stmts: prepared{db: db}, life: ctx, stop: stop}
	if c.sweepInterval > 0 {
		s.sweeping.Add(1)
		go s.sweepLoop(ctx)
	}
	return s
}

// Close stops the sweeper, waits for a sweep under way to end, and closes
// the statements the store prepared on db's connections, which frees them
// on the server. It does not close db. Call it once the server no longer
// uses the store: a step running meanwhile may fail, as after any error of
// the database. It always returns nil, and is safe to call more than once;
// a Store used after Close prepares its statements again.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.sweeping.Wait()
		s.stmts.close()
	})
	return nil
}

// maxClaimRounds bounds how many times a claim reads the key again after
// another claim, a release or a sweep changed its row between the claim's
// read and its write. Each round ends because another step on the key
// succeeded; running out of rounds is an error, not a verdict.
const maxClaimRounds = 16

// errContended is the error of a claim that ran out of rounds.
var errContended = errors.New("the key's row kept changing between the claim's read and its write")

// Claim implements [store.Store.Claim]. It first reads the key's row with
// a plain SELECT, a consistent read that takes no lock and writes nothing:
// a live row, completed, in flight or abandoned, is returned as read, so a
// replay and an in-flight duplicate cost one round trip and never wait for
// a lock. Only a key with no live row is written: an INSERT claims a key
// with no row (the primary key refuses a second one), an UPDATE takes over
// an expired row (the row lock and its check of expires_at let one claim
// through). A take-over (opts.TakeOver) that reads an abandoned row with
// its fingerprint resumes it with an UPDATE fenced by the abandoned token,
// which the read returned: the same two round trips. When another step
// changed the row between the read and the write (a duplicate-key error,
// or an UPDATE that matched nothing), the claim reads the key again.
//
// When its INSERT or UPDATE fails after it was sent, the claim may have
// landed all the same; Claim then releases it, fenced by the claim's fresh
// token, before it returns the error, so that no claim nobody owns blocks
// the key for a whole lease (see the package documentation). A take-over
// that may have landed is abandoned instead: the entry stays abandoned
// (one attempt further), as it was, rather than freed for a run that does
// not know about the abandoned attempt.
func (s *Store) Claim(ctx context.Context, key string, fingerprint []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	us, err := micros("lease", lease)
	if err != nil {
		return store.ClaimResult{}, err
	}
	keep, err := keepMicros(opts.Keep)
	if err != nil {
		return store.ClaimResult{}, err
	}
	if err := checkSizes(key, fingerprint); err != nil {
		return store.ClaimResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.ClaimResult{}, s.fail("claim", key, err)
	}
	token := store.NewToken()
	for range maxClaimRounds {
		var r claimRow
		found, err := s.read(ctx, key, &r)
		if err != nil {
			return store.ClaimResult{}, s.fail("claim", key, err)
		}
		resume := found && r.live == 1 && opts.TakeOver && r.state == stateAbandoned && bytes.Equal(r.fp, fingerprint) && r.token != nil
		if found && r.live == 1 && !resume {
			return s.existing(key, r.state, r.fp, r.data)
		}
		var n int64
		switch {
		case resume:
			n, err = s.exec(ctx, s.sql.resume, []byte(token), us, us, []byte(key), r.token)
		case found:
			n, err = s.exec(ctx, s.sql.takeover, []byte(token), fingerprint, us+keep, keep, us, []byte(key))
		default:
			n, err = s.exec(ctx, s.sql.insert, []byte(key), []byte(token), fingerprint, us+keep, keep, us)
			if isDuplicate(err) {
				continue // claimed by another meanwhile: read it
			}
		}
		switch {
		case err == nil && n == 1 && resume:
			c := store.ClaimResult{Token: token, Attempt: int(r.attempt) + 1}
			c.Previous, _ = store.TokenTime(string(r.token))
			return c, nil
		case err == nil && n == 1:
			return store.ClaimResult{Token: token, Attempt: 1}, nil
		case err == nil, isDeadlock(err):
			continue // taken over, released or swept meanwhile: read again
		}
		if mayHaveLanded(err) {
			s.undoFailedClaim(ctx, key, token, resume)
		}
		return store.ClaimResult{}, s.fail("claim", key, err)
	}
	return store.ClaimResult{}, s.fail("claim", key, errContended)
}

// claimRow is the key's row as the claim's read returns it.
type claimRow struct {
	state, live, attempt int64
	fp, data, token      []byte
}

// existing returns the entry of a live row as a claim that lost sees it.
func (s *Store) existing(key string, state int64, fp, data []byte) (store.ClaimResult, error) {
	e := store.Entry{Fingerprint: fp}
	switch state {
	case stateInFlight:
		e.State = store.StateInFlight
	case stateAbandoned:
		e.State = store.StateAbandoned
	case stateCompleted:
		e.State = store.StateCompleted
		e.Data = data
		if e.Data == nil {
			e.Data = []byte{}
		}
	default:
		return store.ClaimResult{}, fmt.Errorf("mysqlstore: claim %x in %s: unknown state %d: %w", key, s.table, state, store.ErrCorrupt)
	}
	if e.Fingerprint == nil {
		e.Fingerprint = []byte{}
	}
	return store.ClaimResult{Existing: e}, nil
}

// undoFailedClaim undoes the claim of token, if it landed: it releases a
// claim of a free or expired key, and abandons a take-over of an abandoned
// one, which leaves the entry abandoned as it was. It is best effort: its
// error is dropped, since the claim's own error is reported.
func (s *Store) undoFailedClaim(ctx context.Context, key, token string, resumed bool) {
	undo := s.Release
	if resumed {
		undo = s.Abandon
	}
	sqlcore.ReleaseFailedClaim(ctx, func(ctx context.Context) error { return undo(ctx, key, token) })
}

// Complete implements [store.Store.Complete] with one UPDATE fenced by the
// token and the lease. Complete resent with the token that completed the
// row returns nil and changes nothing (it costs one more SELECT, unless
// the connection counts found rows).
func (s *Store) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	us, err := micros("retention", retention)
	if err != nil {
		return err
	}
	if data == nil {
		data = []byte{}
	}
	return s.fenced(ctx, "complete", key, token, s.sql.completed, s.sql.complete, data, us, []byte(key), []byte(token))
}

// Extend implements [store.Store.Extend] with one UPDATE fenced by the
// token, the in-flight state and the lease: lease_until for an entry
// claimed with Keep (so that an abandoned entry stays abandoned), whose
// Keep it keeps beyond the new lease, and expires_at otherwise.
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	us, err := micros("lease", lease)
	if err != nil {
		return err
	}
	return s.fenced(ctx, "extend", key, token, s.sql.held, s.sql.extend, us, us, []byte(key), []byte(token))
}

// fenced runs q, an UPDATE that changes the key's row only while the token
// owns it. MySQL counts the rows a statement changed, not those it matched
// (unless the connection asks for found rows), so a row that matched and
// was left as it was counts as none: a Complete resent after it landed, an
// Extend that sets the lease's end where it is. When q changed no row,
// check, a SELECT of the row the step leaves behind when it succeeds (the
// token's completed row, the token's live in-flight row), tells success
// from a lost lease. The token never owns the key again once it lost it,
// so the check cannot mistake a row changed meanwhile for its own.
func (s *Store) fenced(ctx context.Context, op, key, token, check, q string, args ...any) error {
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
	ok, err := s.queryRow(ctx, check, []any{[]byte(key), []byte(token)}, new(int64))
	if err != nil {
		return s.fail(op, key, err)
	}
	if !ok {
		return fmt.Errorf("mysqlstore: %s %x in %s: %w", op, key, s.table, store.ErrLeaseLost)
	}
	return nil
}

// Release implements [store.Store.Release] with one DELETE fenced by the
// token and the in-flight state. When it deletes nothing, one SELECT tells
// whether the key holds a live row (another owner's, or a completed one:
// ErrLeaseLost) or none (nothing left to release: nil).
func (s *Store) Release(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return s.fail("release", key, err)
	}
	n, err := s.exec(ctx, s.sql.release, []byte(key), []byte(token))
	if err != nil {
		return s.fail("release", key, err)
	}
	if n > 0 {
		return nil
	}
	live, err := s.queryRow(ctx, s.sql.live, []any{[]byte(key)}, new(int64))
	if err != nil {
		return s.fail("release", key, err)
	}
	if live {
		return fmt.Errorf("mysqlstore: release %x in %s: %w", key, s.table, store.ErrLeaseLost)
	}
	return nil
}

// fail wraps a database or context error of op.
func (s *Store) fail(op, key string, err error) error {
	return fmt.Errorf("mysqlstore: %s %x in %s: %w", op, key, s.table, err)
}

// checkSizes returns an argument error for a key or a fingerprint longer
// than its column.
func checkSizes(key string, fingerprint []byte) error {
	switch {
	case len(key) > maxKey:
		return fmt.Errorf("mysqlstore: a key of %d bytes is longer than the %d the table holds", len(key), maxKey)
	case len(fingerprint) > maxFingerprint:
		return fmt.Errorf("mysqlstore: a fingerprint of %d bytes is longer than the %d the table holds", len(fingerprint), maxFingerprint)
	}
	return nil
}

// micros returns d in whole microseconds, rounded up, or an error for a
// duration that is not positive. Every positive duration, up to
// math.MaxInt64 (about 292 years), is an interval MySQL can add to its
// clock; an expiry past DATETIME's range (the year 9999) is saturated.
func micros(what string, d time.Duration) (int64, error) {
	n, ok := store.Units(d, time.Microsecond)
	if !ok {
		return 0, fmt.Errorf("mysqlstore: %s must be positive, got %v", what, d)
	}
	return n, nil
}

// Abandon implements [store.Store.Abandon] with one UPDATE fenced by the
// token, the in-flight state and the lease: it sets the lease's end of an
// entry claimed with Keep to now, and its expires_at to now plus its Keep;
// an entry without Keep expires now, which makes it absent to every step,
// as a deleted one is (the sweeper deletes it). When it changes no row,
// one SELECT tells an abandoned entry the token still owns (nil) from a
// lost lease.
func (s *Store) Abandon(ctx context.Context, key, token string) error {
	return s.fenced(ctx, "abandon", key, token, s.sql.owned, s.sql.abandon, []byte(key), []byte(token))
}

// keepMicros returns ClaimOptions.Keep in whole microseconds, rounded up:
// 0 for no Keep, an error for a negative one.
func keepMicros(keep time.Duration) (int64, error) {
	switch {
	case keep == 0:
		return 0, nil
	case keep < 0:
		return 0, fmt.Errorf("mysqlstore: keep must not be negative, got %v", keep)
	}
	return micros("keep", keep)
}
