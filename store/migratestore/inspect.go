package migratestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/grpc-idempotency/idempotency/store"
)

var _ store.Inspector = (*Store)(nil)

// inspectors returns the two stores as store.Inspectors, or an error
// wrapping errors.ErrUnsupported when either is not one.
func (s *Store) inspectors() (to, from store.Inspector, err error) {
	to, okTo := s.to.(store.Inspector)
	from, okFrom := s.from.(store.Inspector)
	switch {
	case !okTo:
		return nil, nil, fmt.Errorf("migratestore: the new store (%T) is not a store.Inspector: %w", s.to, errors.ErrUnsupported)
	case !okFrom:
		return nil, nil, fmt.Errorf("migratestore: the old store (%T) is not a store.Inspector: %w", s.from, errors.ErrUnsupported)
	}
	return to, from, nil
}

// Lookup looks key up in both stores, the new one first, and returns the
// new store's entry when it holds one, the old store's otherwise: the
// entry a Claim would answer with. Its Token names the entries of both
// stores, so that a Purge fenced by it deletes them and nothing else.
// It costs a round trip to each store. An error of either store is
// returned.
func (s *Store) Lookup(ctx context.Context, key string) (store.Info, error) {
	to, from, err := s.inspectors()
	if err != nil {
		return store.Info{}, err
	}
	newInfo, newErr := to.Lookup(ctx, key)
	oldInfo, oldErr := from.Lookup(ctx, key)
	newFound, oldFound := newErr == nil, oldErr == nil
	if err := errors.Join(unlessNotFound(newErr), unlessNotFound(oldErr)); err != nil {
		return store.Info{}, err
	}
	if !newFound && !oldFound {
		return store.Info{}, newErr
	}
	info := newInfo
	if !newFound {
		info = oldInfo
	}
	info.Token = fence{newPart: part(newFound, newInfo.Token), oldPart: part(oldFound, oldInfo.Token)}.String()
	return info, nil
}

// unlessNotFound returns err, or nil when it is store.ErrNotFound.
func unlessNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// Purge purges key from the new store, then from the old one, each with
// opts, in the order of Complete, so that whichever of a Purge and a
// Complete reaches the new store first wins in both. It returns the entry
// it purged (the new store's, when both held one). A refusal of the new
// store (in flight, changed) stops it before the old store is touched; a
// refusal of the old store comes after the new store's entry is gone, and
// leaves the key answered from the old store, as Claim answers: it is
// returned all the same, and the purge can be made again.
//
// With opts.Token, a fence from Lookup or List: a store that held no
// entry when it was looked at is left alone, a store whose entry a
// listing did not see is purged without a token, and when the new store's
// entry that the fence names is gone (purged by another call, or expired)
// it returns store.ErrNotFound without touching the old store. Without
// opts.Token it returns store.ErrNotFound when neither store holds the key.
func (s *Store) Purge(ctx context.Context, key string, opts store.PurgeOptions) (store.Info, error) {
	to, from, err := s.inspectors()
	if err != nil {
		return store.Info{}, err
	}
	f := fence{newPart: "*", oldPart: "*"}
	if opts.Token != "" {
		var ok bool
		if f, ok = parseFence(opts.Token); !ok {
			// Not a fence of this Store: it names no entry, and each
			// store answers it as the foreign token it is.
			f = fence{newPart: tokenPart(opts.Token), oldPart: tokenPart(opts.Token)}
		}
	}
	newInfo, newErr := purgeOne(ctx, to, key, opts.InFlight, f.newPart)
	switch {
	case newErr != nil && !errors.Is(newErr, store.ErrNotFound):
		return newInfo, newErr
	case newErr != nil && strings.HasPrefix(f.newPart, "="):
		return store.Info{}, newErr // another call purged it, and the old store's entry with it
	}
	oldInfo, oldErr := purgeOne(ctx, from, key, opts.InFlight, f.oldPart)
	switch {
	case oldErr != nil && !errors.Is(oldErr, store.ErrNotFound):
		return oldInfo, oldErr
	case newErr == nil:
		return newInfo, nil
	case oldErr == nil:
		return oldInfo, nil
	}
	return store.Info{}, newErr
}

// purgeOne purges key from in as a part of a fence says: "-" leaves it
// alone (store.ErrNotFound), "*" purges without a token, anything else is
// the token to purge with.
func purgeOne(ctx context.Context, in store.Inspector, key string, inFlight bool, p string) (store.Info, error) {
	switch p {
	case "-":
		return store.Info{}, fmt.Errorf("migratestore: purge %q: not looked at: %w", key, store.ErrNotFound)
	case "*":
		return in.Purge(ctx, key, store.PurgeOptions{InFlight: inFlight})
	}
	tok, _ := strings.CutPrefix(p, "=")
	return in.Purge(ctx, key, store.PurgeOptions{InFlight: inFlight, Token: tok})
}

// fence is the Token of an Info of this Store: a part per store, "-" when
// the store held no entry, "*" when its entry is not known (a listing
// sees one store at a time), or "=" and the store's own Token.
type fence struct{ newPart, oldPart string }

// part returns the part of a store that found (or not) the entry token
// names.
func part(found bool, token string) string {
	if !found {
		return "-"
	}
	return tokenPart(token)
}

func tokenPart(token string) string { return "=" + token }

// fencePrefix starts every fence: "mf", the new part's length, a colon.
const fencePrefix = "mf"

func (f fence) String() string {
	return fencePrefix + strconv.Itoa(len(f.newPart)) + ":" + f.newPart + f.oldPart
}

// parseFence undoes fence.String.
func parseFence(s string) (fence, bool) {
	rest, ok := strings.CutPrefix(s, fencePrefix)
	if !ok {
		return fence{}, false
	}
	head, rest, ok := strings.Cut(rest, ":")
	n, err := strconv.Atoi(head)
	if !ok || err != nil || n < 1 || n > len(rest) || strconv.Itoa(n) != head {
		return fence{}, false
	}
	f := fence{newPart: rest[:n], oldPart: rest[n:]}
	return f, validPart(f.newPart) && validPart(f.oldPart)
}

func validPart(p string) bool {
	return p == "-" || p == "*" || strings.HasPrefix(p, "=")
}

// List walks the new store, then the old one: a key that both hold (every
// key claimed through this Store during a move) is listed twice, once per
// store. Each page holds entries of one store, whose Tokens name that
// store's entry, and the other store's entry as unknown (a Purge fenced
// by it purges that one without a token).
func (s *Store) List(ctx context.Context, opts store.ListOptions) (store.Page, error) {
	to, from, err := s.inspectors()
	if err != nil {
		return store.Page{}, err
	}
	old, inner, ok := parseCursor(opts.Cursor)
	if !ok {
		return store.Page{}, fmt.Errorf("migratestore: list cursor %q: %w", opts.Cursor, store.ErrCursor)
	}
	in := to
	if old {
		in = from
	}
	opts.Cursor = inner
	page, err := in.List(ctx, opts)
	if err != nil {
		return store.Page{}, err
	}
	for i := range page.Entries {
		f := fence{newPart: tokenPart(page.Entries[i].Token), oldPart: "*"}
		if old {
			f = fence{newPart: "*", oldPart: tokenPart(page.Entries[i].Token)}
		}
		page.Entries[i].Token = f.String()
	}
	switch {
	case page.Next != "" && old:
		page.Next = cursorOld + page.Next
	case page.Next != "":
		page.Next = cursorNew + page.Next
	case !old:
		page.Next = cursorOld // the new store is done: the old one next
	}
	return page, nil
}

// Cursors of List: the store the walk is in, and that store's cursor.
const (
	cursorNew = "mn:"
	cursorOld = "mo:"
)

func parseCursor(c string) (old bool, inner string, ok bool) {
	if c == "" {
		return false, "", true
	}
	if inner, ok := strings.CutPrefix(c, cursorNew); ok && inner != "" {
		return false, inner, true
	}
	if inner, ok := strings.CutPrefix(c, cursorOld); ok {
		return true, inner, true
	}
	return false, "", false
}

// Stats adds up the two stores' Stats. During a move, a key claimed
// through this Store lives in both stores and is counted twice; a key of
// a server still on the old store alone, once. Its cost is the two
// stores' together.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	to, from, err := s.inspectors()
	if err != nil {
		return store.Stats{}, err
	}
	a, err := to.Stats(ctx)
	if err != nil {
		return store.Stats{}, err
	}
	b, err := from.Stats(ctx)
	if err != nil {
		return store.Stats{}, err
	}
	return store.Stats{
		InFlight:  store.Count{Entries: a.InFlight.Entries + b.InFlight.Entries, Bytes: a.InFlight.Bytes + b.InFlight.Bytes},
		Completed: store.Count{Entries: a.Completed.Entries + b.Completed.Entries, Bytes: a.Completed.Bytes + b.Completed.Bytes},
		Estimated: a.Estimated || b.Estimated,
	}, nil
}
