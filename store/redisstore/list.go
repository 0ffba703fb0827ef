package redisstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// List implements [store.Inspector.List]: each call is one SCAN step (COUNT
// opts.Limit, MATCH the prefix, its glob characters escaped), with the
// header of each of the store's entries it finds (a key under the prefix
// with a ':' after it is another store's: see [WithPrefix])
// (state, owner token, fingerprint: no data) read in the same read-only
// script, one round trip. The entries come in SCAN's order, which is no
// order at all: oldest first would need an index that every claim would
// pay for. The state and age of each entry are checked here, the age
// from the claim time its owner token carries (an entry whose token has
// none, claimed by an earlier release, is kept whatever MinAge is).
//
// SCAN's COUNT is a hint: a step ends at a hash bucket's end, so a page
// may hold a few more entries than Limit (up to twice as many on a table
// that is being rehashed). SCAN's promise holds for the walk: an entry
// that lives from the first page to the last is listed, at least once.
//
// On a Cluster the walk scans each master in turn, in the order of their
// addresses; the cursor names the master and SCAN's cursor on it. A
// master that left the cluster during the walk (a failover) is taken up
// from the start of the next master: the keys of its slots may then be
// missed, or listed twice when the slots moved to a master the walk has
// still to scan.
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.Page, error) {
	limit, err := opts.PageSize()
	if err != nil {
		return store.Page{}, fmt.Errorf("redisstore: %w", err)
	}
	c, err := parseListCursor(opts.Cursor)
	if err != nil {
		return store.Page{}, err
	}
	ms, err := s.masters(ctx)
	if err != nil {
		return store.Page{}, fmt.Errorf("redisstore: list: %w", err)
	}
	i := 0
	for i < len(ms) && ms[i].addr < c.addr {
		i++
	}
	if i == len(ms) {
		return store.Page{}, nil // the masters left are gone
	}
	if ms[i].addr != c.addr {
		c = listCursor{addr: ms[i].addr, scan: 0}
	}
	reply, err := s.eval(ctx, ms[i].c, listScript, nil, c.scan, matchPrefix(s.prefix), limit, len(s.prefix))
	if err != nil {
		return store.Page{}, fmt.Errorf("redisstore: list %s: %w", ms[i].nameOf(), err)
	}
	next, entries, err := decodeListReply(s.prefix, reply)
	if err != nil {
		return store.Page{}, fmt.Errorf("redisstore: list %s: %w", ms[i].nameOf(), err)
	}
	var page store.Page
	now := time.Now()
	for _, info := range entries {
		if opts.Matches(info, now) {
			page.Entries = append(page.Entries, info)
		}
	}
	switch {
	case next != 0:
		page.Next = listCursor{addr: ms[i].addr, scan: next}.String()
	case i+1 < len(ms):
		page.Next = listCursor{addr: ms[i+1].addr}.String()
	}
	return page, nil
}

// matchPrefix returns the MATCH pattern of the keys under prefix: the
// prefix with its glob characters escaped, then *.
func matchPrefix(prefix string) string {
	var b strings.Builder
	for _, r := range prefix {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String() + "*"
}

// listCursor is where a walk of List stands: a master ("" but on a
// Cluster) and SCAN's cursor on it.
type listCursor struct {
	addr string
	scan uint64
}

// Cursors of this store start with listCursorPrefix, then SCAN's cursor,
// a dot, and the master's address in unpadded base64url: one shell word,
// as [store.Page] promises. A cursor of an earlier release ("r1:" and a
// space) is refused.
const (
	listCursorPrefix = "r2."
	oldCursorPrefix  = "r1:"
)

func (c listCursor) String() string {
	return listCursorPrefix + strconv.FormatUint(c.scan, 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(c.addr))
}

// parseListCursor reads a cursor of String; "" is the start of a walk.
func parseListCursor(s string) (listCursor, error) {
	if s == "" {
		return listCursor{}, nil
	}
	if strings.HasPrefix(s, oldCursorPrefix) {
		return listCursor{}, fmt.Errorf("redisstore: list cursor %q is of an earlier release: start the walk again: %w", s, store.ErrCursor)
	}
	rest, ok := strings.CutPrefix(s, listCursorPrefix)
	scan, addr, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return listCursor{}, fmt.Errorf("redisstore: list cursor %q: %w", s, store.ErrCursor)
	}
	n, err := strconv.ParseUint(scan, 10, 64)
	if err != nil {
		return listCursor{}, fmt.Errorf("redisstore: list cursor %q: %w", s, store.ErrCursor)
	}
	a, err := base64.RawURLEncoding.Strict().DecodeString(addr)
	if err != nil {
		return listCursor{}, fmt.Errorf("redisstore: list cursor %q: %w", s, store.ErrCursor)
	}
	return listCursor{addr: string(a), scan: n}, nil
}
