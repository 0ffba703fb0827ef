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
	state       int64 // 3 for an abandoned row
	token       []byte
	fingerprint []byte
	data        []byte
	expires     int64 // microseconds since the Unix epoch
	size        int64
	attempt     int64
}

// stored returns the state column of r: 1 for an abandoned row.
func (r row) stored() int64 {
	if r.state == stateAbandoned {
		return stateInFlight
	}
	return r.state
}

// core returns r as the shared code reads it, which knows the states of
// the column only: an abandoned row is in flight there (see info).
func (r row) core() sqlcore.Row {
	return sqlcore.Row{
		Key:         r.key,
		State:       r.stored(),
		Token:       r.token,
		Fingerprint: r.fingerprint,
		Data:        r.data,
		Expires:     time.UnixMicro(r.expires).UTC(),
		Size:        r.size,
	}
}

// info describes r.
func (s *Store) info(r row) (store.Info, error) {
	i, err := sqlcore.Info("mysqlstore", s.table, r.core())
	if err != nil {
		return store.Info{}, err
	}
	return r.complete(i), nil
}

// complete adds to i, which the shared code made from r, what it does not
// know: whether r is abandoned, and its attempt.
func (r row) complete(i store.Info) store.Info {
	if r.state == stateAbandoned {
		i.State = store.StateAbandoned
	}
	i.Attempt = int(r.attempt)
	return i
}

// lookup reads the key's live row.
func (s *Store) lookup(ctx context.Context, key string) (row, bool, error) {
	r := row{key: []byte(key)}
	found, err := s.queryRow(ctx, s.isql.lookup, []any{[]byte(key)},
		&r.state, &r.token, &r.fingerprint, &r.data, &r.expires, &r.size, &r.attempt)
	return r, found, err
}

// purgeRefusal is [sqlcore.PurgeRefusal] for an abandoned entry too, which
// Purge treats as in flight: it deletes one only with InFlight.
func purgeRefusal(info store.Info, opts store.PurgeOptions) error {
	if info.State == store.StateAbandoned {
		info.State = store.StateInFlight
	}
	return sqlcore.PurgeRefusal(info, opts)
}

// Lookup implements [store.Inspector.Lookup] with one SELECT of the key's
// live row through the primary key: one round trip. Info.Claimed is read
// from the owner token ([store.TokenTime]): the claiming server's clock,
// and zero for a token it cannot read; Info.Completed is always zero, as
// the table keeps no completion time; Info.Expires is, by the database's
// clock, in UTC, the end of the lease while in flight (lease_until, or
// expires_at for an entry claimed without Keep), and expires_at for an
// abandoned entry (the end of its Keep) or a completed one; Info.Size counts the key, token, fingerprint
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

// Purge implements [store.Inspector.Purge] in two steps, atomic by
// fencing: a SELECT of the key's live row, checked against opts, then a
// DELETE of that very entry, fenced by the token and the state it was read
// with. MySQL's DELETE returns no row, so the row comes from the read; a
// DELETE that finds the entry changed (completed, purged, taken over)
// deletes nothing, and Purge reads the key again. The DELETE runs in a
// READ COMMITTED transaction that also logs the key in the table's purge
// log, which every [Store.Invalidations] on the table reads: purges lock
// the log's head one after the other, from their DELETE to their commit.
// A purge fails, deleting nothing, on a table whose log is missing (run
// [Store.Migrate]).
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
		if err := purgeRefusal(info, opts); err != nil {
			return info, s.fail("purge", key, err)
		}
		n, err := s.purgeLogged(ctx, r.key, r.token, r.stored())
		if isDeadlock(err) {
			continue // rolled back: read the key again
		}
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
	// The shared page knows the states of the column only: it filters
	// by age, and the state is filtered here once each entry has its own.
	page := sqlcore.Page{Pkg: "mysqlstore", Table: s.table, Cursor: listCursor, Limit: limit, Opts: store.ListOptions{MinAge: opts.MinAge}, Now: time.Now()}
	read := make(map[string]row, limit)
	for rows.Next() {
		var (
			r    row
			live int64
		)
		if err := rows.Scan(&r.key, &r.state, &r.token, &r.fingerprint, &r.expires, &r.size, &live, &r.attempt); err != nil {
			return store.Page{}, fmt.Errorf("mysqlstore: list %s: %w", s.table, err)
		}
		page.Add(r.core(), live == 1)
		read[string(r.key)] = r
	}
	if err := rows.Err(); err != nil {
		return store.Page{}, fmt.Errorf("mysqlstore: list %s: %w", s.table, err)
	}
	p := page.Page()
	kept := p.Entries[:0]
	for _, i := range p.Entries {
		if i = read[i.Key].complete(i); opts.State == 0 || i.State == opts.State {
			kept = append(kept, i)
		}
	}
	p.Entries = kept
	return p, nil
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
		if state == stateAbandoned {
			st.Abandoned = c
		} else {
			sqlcore.AddStats(&st, state, c)
		}
	}
	if err := rows.Err(); err != nil {
		return store.Stats{}, fmt.Errorf("mysqlstore: stats of %s: %w", s.table, err)
	}
	return st, nil
}
