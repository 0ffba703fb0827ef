package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

// scanRow reads the columns of an inspection statement (cols in
// inspect_sql.go) into r, after the ones given before.
func scanRow(sc interface{ Scan(...any) error }, r *sqlcore.Row, before []any, after ...any) error {
	var expires int64
	dest := make([]any, 0, len(before)+7+len(after))
	dest = append(dest, before...)
	dest = append(dest, &r.State, &r.Token, &r.Fingerprint, &expires, &r.Size, &r.Abandoned, &r.Attempt)
	if err := sc.Scan(append(dest, after...)...); err != nil {
		return err
	}
	r.Expires = time.UnixMilli(expires).UTC()
	return nil
}

// lookup reads the key's live row.
func (s *Store) lookup(ctx context.Context, key string) (sqlcore.Row, bool, error) {
	r := sqlcore.Row{Key: []byte(key)}
	st, err := s.stmts.stmt(ctx, s.isql.lookup)
	if err != nil {
		return r, false, err
	}
	err = scanRow(st.QueryRowContext(ctx, []byte(key)), &r, nil, &r.Data)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

// Lookup implements [store.Inspector.Lookup] with one SELECT of the key's
// live row through the primary key. Info.Claimed is read from the owner
// token ([store.TokenTime]): the claiming process's clock, and zero for a
// token it cannot read; Info.Completed is always zero, as the table keeps
// no completion time; Info.Expires is, by SQLite's clock, in UTC, the end
// of the lease while in flight (lease_until, or expires_at for an entry
// claimed without Keep), and expires_at for an abandoned entry (the end
// of its Keep) or a completed one; Info.Size counts the key, token,
// fingerprint and data columns.
func (s *Store) Lookup(ctx context.Context, key string) (store.Info, error) {
	if err := ctx.Err(); err != nil {
		return store.Info{}, s.fail("lookup", key, err)
	}
	r, found, err := s.lookup(ctx, key)
	if err != nil {
		return store.Info{}, s.fail("lookup", key, err)
	}
	if !found {
		return store.Info{}, s.fail("lookup", key, store.ErrNotFound)
	}
	return sqlcore.Info("sqlitestore", s.table, r)
}

// maxPurgeRounds bounds how many times Purge reads the key again after the
// entry it read changed before its DELETE.
const maxPurgeRounds = 16

// errContended is the error of a Purge that ran out of rounds.
var errContended = errors.New("the key's row kept changing between the purge's read and its delete")

// Purge implements [store.Inspector.Purge] in two steps, atomic by
// fencing: a SELECT of the key's live row, checked against opts, then a
// DELETE of that very entry, fenced by the token and the state it was read
// with. A DELETE that finds the entry changed (completed, purged, taken
// over) deletes nothing, and Purge reads the key again. The DELETE that
// deletes the entry logs its key in the purge log in the same
// transaction, which every [Store.Invalidations] on the file reads (and
// deletes the log's rows older than an hour): a purge fails, deleting
// nothing, on a file whose log is missing (run [Store.Migrate]).
func (s *Store) Purge(ctx context.Context, key string, opts store.PurgeOptions) (store.Info, error) {
	if err := ctx.Err(); err != nil {
		return store.Info{}, s.fail("purge", key, err)
	}
	for range maxPurgeRounds {
		r, found, err := s.lookup(ctx, key)
		if err != nil {
			return store.Info{}, s.fail("purge", key, err)
		}
		if !found {
			return store.Info{}, s.fail("purge", key, store.ErrNotFound)
		}
		info, err := sqlcore.Info("sqlitestore", s.table, r)
		if err != nil {
			return store.Info{}, err
		}
		if err := sqlcore.PurgeRefusal(info, opts); err != nil {
			return info, s.fail("purge", key, err)
		}
		if s.cfg.purgeRead != nil {
			s.cfg.purgeRead()
		}
		n, err := s.purgeLogged(ctx, r.Key, r.Token, r.State, r.Abandoned)
		if err != nil {
			return store.Info{}, s.fail("purge", key, err)
		}
		if n == 1 {
			return info, nil
		}
	}
	return store.Info{}, s.fail("purge", key, errContended)
}

// List implements [store.Inspector.List] with one SELECT per page, which
// reads the next opts.Limit rows in key order from the primary key
// (keyset pagination: the cursor is the last key read), without their
// data, and keeps those that are live and match. The order is the keys',
// which the interceptor's hashing makes random. The age of an entry is
// read from its owner token (an entry whose token has none is kept
// whatever MinAge is). A page costs one range read of Limit rows of the
// primary key, whatever the size of the table.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.Page, error) {
	limit, err := opts.PageSize()
	if err != nil {
		return store.Page{}, fmt.Errorf("sqlitestore: %w", err)
	}
	after, first, err := listCursor.Parse(opts.Cursor)
	if err != nil {
		return store.Page{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Page{}, fmt.Errorf("sqlitestore: list %s: %w", s.table, err)
	}
	q, args := s.isql.listFirst, []any{limit}
	if !first {
		q, args = s.isql.listNext, []any{limit, after}
	}
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return store.Page{}, fmt.Errorf("sqlitestore: list %s: %w", s.table, err)
	}
	defer rows.Close()
	page := sqlcore.Page{Pkg: "sqlitestore", Table: s.table, Cursor: listCursor, Limit: limit, Opts: opts, Now: time.Now()}
	for rows.Next() {
		var (
			r    sqlcore.Row
			live bool
		)
		if err := scanRow(rows, &r, []any{&r.Key}, &live); err != nil {
			return store.Page{}, fmt.Errorf("sqlitestore: list %s: %w", s.table, err)
		}
		page.Add(r, live)
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, fmt.Errorf("sqlitestore: list %s: %w", s.table, err)
	}
	return page.Page(), nil
}

// Stats implements [store.Inspector.Stats] exactly, with one aggregate
// query: a scan of the whole table, O(rows), in a read transaction that
// no writer waits for; call it every minute or so at most on a large
// table.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	if err := ctx.Err(); err != nil {
		return store.Stats{}, fmt.Errorf("sqlitestore: stats of %s: %w", s.table, err)
	}
	rows, err := s.db.QueryContext(ctx, s.isql.stats)
	if err != nil {
		return store.Stats{}, fmt.Errorf("sqlitestore: stats of %s: %w", s.table, err)
	}
	defer rows.Close()
	var st store.Stats
	for rows.Next() {
		var (
			state int64
			c     store.Count
		)
		if err := rows.Scan(&state, &c.Entries, &c.Bytes); err != nil {
			return store.Stats{}, fmt.Errorf("sqlitestore: stats of %s: %w", s.table, err)
		}
		sqlcore.AddStats(&st, state, c)
	}
	if err := rows.Err(); err != nil {
		return store.Stats{}, fmt.Errorf("sqlitestore: stats of %s: %w", s.table, err)
	}
	return st, nil
}
