package mysqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/internal/sqlcore"
)

var _ store.Inspector = (*Store)(nil)

// row is a row as the inspection statements read it.
type row struct {
	key         []byte
	state       int64
	token       []byte
	fingerprint []byte
	data        []byte
	expires     int64 // microseconds since the Unix epoch
	size        int64
}

// core returns r as the shared code reads it.
func (r row) core() sqlcore.Row {
	return sqlcore.Row{
		Key:         r.key,
		State:       r.state,
		Token:       r.token,
		Fingerprint: r.fingerprint,
		Data:        r.data,
		Expires:     time.UnixMicro(r.expires).UTC(),
		Size:        r.size,
	}
}

// info describes r.
func (s *Store) info(r row) (store.Info, error) {
	return sqlcore.Info("mysqlstore", s.table, r.core())
}

// lookup reads the key's live row.
func (s *Store) lookup(ctx context.Context, key string) (row, bool, error) {
	r := row{key: []byte(key)}
	found, err := s.queryRow(ctx, s.isql.lookup, []any{[]byte(key)},
		&r.state, &r.token, &r.fingerprint, &r.data, &r.expires, &r.size)
	return r, found, err
}

// Lookup implements [store.Inspector.Lookup] with one SELECT of the key's
// live row through the primary key: one round trip. Info.Claimed is read
// from the owner token ([store.TokenTime]): the claiming server's clock,
// and zero for a token it cannot read; Info.Completed is always zero, as
// the table keeps no completion time; Info.Expires is expires_at, by the
// database's clock, in UTC; Info.Size counts the key, token, fingerprint
// and data columns.
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
	return s.info(r)
}

// maxPurgeRounds bounds how many times Purge reads the key again after the
// entry it read changed before its DELETE.
const maxPurgeRounds = 16

// Purge implements [store.Inspector.Purge] in two statements, atomic by
// fencing: a SELECT of the key's live row, checked against opts, then a
// DELETE of that very entry, fenced by the token and the state it was read
// with. MySQL's DELETE returns no row, so the row comes from the read; a
// DELETE that finds the entry changed (completed, purged, taken over)
// deletes nothing, and Purge reads the key again. No invalidation is sent:
// the store is not a [store.Invalidator] (see the package documentation).
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
		info, err := s.info(r)
		if err != nil {
			return store.Info{}, err
		}
		if err := sqlcore.PurgeRefusal(info, opts); err != nil {
			return info, s.fail("purge", key, err)
		}
		n, err := s.exec(ctx, s.isql.purge, r.key, r.token, r.state)
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
// which the interceptor's hashing makes random: listing oldest first would
// need an index on the claim time, which every claim would pay for. The
// age of an entry is read from its owner token (an entry whose token has
// none is kept whatever MinAge is). A page costs one range read of Limit
// rows of the primary key, whatever the size of the table.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.Page, error) {
	limit, err := opts.PageSize()
	if err != nil {
		return store.Page{}, fmt.Errorf("mysqlstore: %w", err)
	}
	after, first, err := listCursor.Parse(opts.Cursor)
	if err != nil {
		return store.Page{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Page{}, fmt.Errorf("mysqlstore: list %s: %w", s.table, err)
	}
	sqlText, args := s.isql.listFirst, []any{limit}
	if !first {
		sqlText, args = s.isql.listNext, []any{after, limit}
	}
	st, err := s.stmts.stmt(ctx, sqlText)
	if err != nil {
		return store.Page{}, fmt.Errorf("mysqlstore: list %s: %w", s.table, err)
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return store.Page{}, fmt.Errorf("mysqlstore: list %s: %w", s.table, err)
	}
	defer rows.Close()
	page := sqlcore.Page{Pkg: "mysqlstore", Table: s.table, Cursor: listCursor, Limit: limit, Opts: opts, Now: time.Now()}
	for rows.Next() {
		var (
			r    row
			live int64
		)
		if err := rows.Scan(&r.key, &r.state, &r.token, &r.fingerprint, &r.expires, &r.size, &live); err != nil {
			return store.Page{}, fmt.Errorf("mysqlstore: list %s: %w", s.table, err)
		}
		page.Add(r.core(), live == 1)
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, fmt.Errorf("mysqlstore: list %s: %w", s.table, err)
	}
	return page.Page(), nil
}

// listCursor reads and writes the cursors of List: "m1:", then the hex of
// the last key read.
var listCursor = sqlcore.Cursor{Pkg: "mysqlstore", Prefix: "m1:"}

// Stats implements [store.Inspector.Stats] exactly, with one aggregate
// query: a scan of the whole table, O(rows); call it every minute or so at
// most on a large table.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	if err := ctx.Err(); err != nil {
		return store.Stats{}, fmt.Errorf("mysqlstore: stats of %s: %w", s.table, err)
	}
	rows, err := s.db.QueryContext(ctx, s.isql.stats)
	if err != nil {
		return store.Stats{}, fmt.Errorf("mysqlstore: stats of %s: %w", s.table, err)
	}
	defer rows.Close()
	var st store.Stats
	for rows.Next() {
		var (
			state int64
			c     store.Count
		)
		if err := rows.Scan(&state, &c.Entries, &c.Bytes); err != nil {
			return store.Stats{}, fmt.Errorf("mysqlstore: stats of %s: %w", s.table, err)
		}
		sqlcore.AddStats(&st, state, c)
	}
	if err := rows.Err(); err != nil {
		return store.Stats{}, fmt.Errorf("mysqlstore: stats of %s: %w", s.table, err)
	}
	return st, nil
}
