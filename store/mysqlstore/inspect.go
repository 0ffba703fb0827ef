package mysqlstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
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

// info describes r.
func (s *Store) info(r row) (store.Info, error) {
	i := store.Info{
		Key:         string(r.key),
		Token:       string(r.token),
		Fingerprint: r.fingerprint,
		Size:        r.size,
		Expires:     time.UnixMicro(r.expires).UTC(),
	}
	if i.Fingerprint == nil {
		i.Fingerprint = []byte{}
	}
	switch r.state {
	case stateInFlight:
		i.State = store.StateInFlight
	case stateCompleted:
		i.State = store.StateCompleted
		i.Data = r.data
		if i.Data == nil {
			i.Data = []byte{}
		}
	default:
		return store.Info{}, fmt.Errorf("mysqlstore: key %x in %s: unknown state %d: %w", r.key, s.table, r.state, store.ErrCorrupt)
	}
	i.Claimed, _ = store.TokenTime(i.Token)
	return i, nil
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
		switch {
		case err != nil:
			return store.Info{}, err
		case opts.Token != "" && info.Token != opts.Token:
			return info, s.fail("purge", key, store.ErrChanged)
		case info.State == store.StateInFlight && !opts.InFlight:
			return info, s.fail("purge", key, store.ErrInFlight)
		case info.State == store.StateCompleted && opts.InFlight:
			return info, s.fail("purge", key, store.ErrChanged)
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
	after, first, err := parseListCursor(opts.Cursor)
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
	var (
		page store.Page
		n    int
		last []byte
		now  = time.Now()
	)
	for rows.Next() {
		var (
			r    row
			live int64
		)
		if err := rows.Scan(&r.key, &r.state, &r.token, &r.fingerprint, &r.expires, &r.size, &live); err != nil {
			return store.Page{}, fmt.Errorf("mysqlstore: list %s: %w", s.table, err)
		}
		n, last = n+1, r.key
		info, err := s.info(r)
		if err != nil || live != 1 {
			continue // a row of an unknown state is reported by Lookup
		}
		info.Data = nil
		if opts.Matches(info, now) {
			page.Entries = append(page.Entries, info)
		}
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, fmt.Errorf("mysqlstore: list %s: %w", s.table, err)
	}
	if n == limit {
		page.Next = listCursorPrefix + hex.EncodeToString(last)
	}
	return page, nil
}

// listCursorPrefix starts every cursor of this store; the hex of the last
// key read follows.
const listCursorPrefix = "m1:"

// parseListCursor reads a cursor of List: the key to read after, or first
// for "", the start of a walk.
func parseListCursor(c string) (after []byte, first bool, err error) {
	if c == "" {
		return nil, true, nil
	}
	h, ok := strings.CutPrefix(c, listCursorPrefix)
	if ok {
		if after, err = hex.DecodeString(h); err == nil {
			return after, false, nil
		}
	}
	return nil, false, fmt.Errorf("mysqlstore: list cursor %q: %w", c, store.ErrCursor)
}

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
		switch state {
		case stateInFlight:
			st.InFlight = c
		case stateCompleted:
			st.Completed = c
		}
	}
	if err := rows.Err(); err != nil {
		return store.Stats{}, fmt.Errorf("mysqlstore: stats of %s: %w", s.table, err)
	}
	return st, nil
}
