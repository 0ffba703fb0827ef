package postgresstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

var _ store.Inspector = (*Store)(nil)

// row is a row as the inspection statements read it.
type row struct {
	key         []byte
	state       int16
	token       []byte
	fingerprint []byte
	data        []byte
	expires     time.Time
	size        int64
	abandoned   bool
	attempt     int32
}

// core returns r as the shared code reads it.
func (r row) core() sqlcore.Row {
	return sqlcore.Row{
		Key:         r.key,
		State:       int64(r.state),
		Token:       r.token,
		Fingerprint: r.fingerprint,
		Data:        r.data,
		Expires:     r.expires,
		Size:        r.size,
		Abandoned:   r.abandoned,
		Attempt:     int64(r.attempt),
	}
}

// info describes r.
func (s *Store) info(r row) (store.Info, error) {
	return sqlcore.Info("postgresstore", s.table, r.core())
}

// Lookup implements [store.Inspector.Lookup] with one SELECT of the key's
// live row through the primary key: one round trip. Info.Claimed is read
// from the owner token ([store.TokenTime]): the claiming server's clock,
// and zero for a token of an earlier release; Info.Completed is always
// zero, as the table keeps no completion time; Info.Expires is the end
// of the lease of an in-flight row, and expires_at otherwise (the end of
// an abandoned row's keep, or of a completed row's retention), by the
// database's clock; Info.Attempt is the attempt column; Info.Size counts
// the key, token, fingerprint and data columns. An in-flight row claimed
// with a keep whose lease ran out is reported abandoned, with its owner
// token.
func (s *Store) Lookup(ctx context.Context, key string) (store.Info, error) {
	if err := ctx.Err(); err != nil {
		return store.Info{}, s.fail("lookup", key, err)
	}
	r := row{key: []byte(key)}
	err := s.pool.QueryRow(ctx, newInspectStatements(s.cfg.table).lookup, []byte(key)).
		Scan(&r.state, &r.token, &r.fingerprint, &r.data, &r.expires, &r.size, &r.abandoned, &r.attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Info{}, s.fail("lookup", key, store.ErrNotFound)
	}
	if err != nil {
		return store.Info{}, s.fail("lookup", key, err)
	}
	return s.info(r)
}

// maxPurgeRounds bounds how many times Purge runs its statement again
// after its two reads of the row disagreed (see Purge).
const maxPurgeRounds = 16

// errPurgeContended is the error of a purge that ran out of rounds.
var errPurgeContended = errors.New("the key's row kept changing while the purge read it")

// Purge implements [store.Inspector.Purge] with one statement: a DELETE
// of the key's live row fenced by its state (with opts.InFlight, in flight
// or abandoned: both are state 1) and, with opts.Token, its token, followed in the same statement by a NOTIFY of the key for
// [Store.Invalidations], sent when it commits: one atomic step and one
// round trip. The channel is the table's, resolved in the same statement
// as the DELETE's table (see [Store.Invalidations]).
//
// When the statement deleted nothing yet the row it read back is one its
// DELETE would have deleted, the DELETE waited for a step that changed the
// row (a completion, a take-over) and found the new row no longer matched,
// while the read, which takes the lock FOR KEY SHARE so as to wait for no
// handler, returned the row as the statement's snapshot held it
// (decision 319). The statement then runs again, on a snapshot that holds
// the new row: it answers from that row, and a third round needs the row
// to change so again. After maxPurgeRounds rounds, Purge gives up with an
// error that is not a verdict (it changed nothing).
func (s *Store) Purge(ctx context.Context, key string, opts store.PurgeOptions) (store.Info, error) {
	if err := ctx.Err(); err != nil {
		return store.Info{}, s.fail("purge", key, err)
	}
	state := int16(stateCompleted)
	if opts.InFlight {
		state = stateInFlight
	}
	var token []byte // NULL: any token
	if opts.Token != "" {
		token = []byte(opts.Token)
	}
	purge := newInspectStatements(s.cfg.table).purge
	for range maxPurgeRounds {
		var (
			purged   bool
			notified int64
			r        = row{key: []byte(key)}
		)
		// A write, so a step: under READ COMMITTED whatever the
		// connections' default isolation (decision 123).
		err := s.queryRow(ctx, purge,
			[]any{[]byte(key), state, token, s.table},
			&purged, &r.state, &r.token, &r.fingerprint, &r.data, &r.expires, &r.size, &r.abandoned, &r.attempt, &notified)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.Info{}, s.fail("purge", key, store.ErrNotFound)
		}
		if err != nil {
			return store.Info{}, s.fail("purge", key, err)
		}
		info, err := s.info(r)
		if err != nil || purged {
			return info, err
		}
		// Not purged: the row the statement read tells why, unless it is
		// one the DELETE would have deleted (see above).
		if refusal := sqlcore.PurgeRefusal(info, opts); refusal != nil {
			return info, s.fail("purge", key, refusal)
		}
	}
	return store.Info{}, s.fail("purge", key, errPurgeContended)
}

// List implements [store.Inspector.List] with one SELECT per page, which
// reads the next opts.Limit rows in key order from the primary key's
// index (keyset pagination: the cursor is the last key read), without
// their data, and keeps those that are live and match. The order is the
// keys', which the interceptor's hashing makes random: listing oldest
// first would need an index on the claim time, which every claim would
// pay for. The age of an entry is read from its owner token (an entry
// whose token has none, claimed by an earlier release, is kept whatever
// MinAge is). A page costs one index range scan of Limit rows, whatever
// the size of the table.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.Page, error) {
	limit, err := opts.PageSize()
	if err != nil {
		return store.Page{}, fmt.Errorf("postgresstore: %w", err)
	}
	after, first, err := listCursor.Parse(opts.Cursor)
	if err != nil {
		return store.Page{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Page{}, fmt.Errorf("postgresstore: list %s: %w", s.table, err)
	}
	sql := newInspectStatements(s.cfg.table)
	var rows pgx.Rows
	if first {
		rows, err = s.pool.Query(ctx, sql.listFirst, limit)
	} else {
		rows, err = s.pool.Query(ctx, sql.listNext, limit, after)
	}
	if err != nil {
		return store.Page{}, fmt.Errorf("postgresstore: list %s: %w", s.table, err)
	}
	defer rows.Close()
	page := sqlcore.Page{Pkg: "postgresstore", Table: s.table, Cursor: listCursor, Limit: limit, Opts: opts, Now: time.Now()}
	for rows.Next() {
		var (
			r    row
			live bool
		)
		if err := rows.Scan(&r.key, &r.state, &r.token, &r.fingerprint, &r.expires, &r.size, &live, &r.abandoned, &r.attempt); err != nil {
			return store.Page{}, fmt.Errorf("postgresstore: list %s: %w", s.table, err)
		}
		page.Add(r.core(), live)
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, fmt.Errorf("postgresstore: list %s: %w", s.table, err)
	}
	return page.Page(), nil
}

// listCursor reads and writes the cursors of List: "p1:", then the hex of
// the last key read.
var listCursor = sqlcore.Cursor{Pkg: "postgresstore", Prefix: "p1:"}

// Stats implements [store.Inspector.Stats] exactly, with one aggregate
// query that counts abandoned rows apart from in-flight ones: a sequential scan of the whole table, O(rows), whose time this
// package's benchmarks measure (BenchmarkInspectPostgres); call it every
// minute or so at most on a large table.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	if err := ctx.Err(); err != nil {
		return store.Stats{}, fmt.Errorf("postgresstore: stats of %s: %w", s.table, err)
	}
	rows, err := s.pool.Query(ctx, newInspectStatements(s.cfg.table).stats)
	if err != nil {
		return store.Stats{}, fmt.Errorf("postgresstore: stats of %s: %w", s.table, err)
	}
	defer rows.Close()
	var st store.Stats
	for rows.Next() {
		var (
			state int16
			c     store.Count
		)
		if err := rows.Scan(&state, &c.Entries, &c.Bytes); err != nil {
			return store.Stats{}, fmt.Errorf("postgresstore: stats of %s: %w", s.table, err)
		}
		sqlcore.AddStats(&st, int64(state), c)
	}
	if err := rows.Err(); err != nil {
		return store.Stats{}, fmt.Errorf("postgresstore: stats of %s: %w", s.table, err)
	}
	return st, nil
}
