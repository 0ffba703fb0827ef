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

// Purge purges key from both stores as one purge: it looks the key up in
// each store first, and decides from both whether opts lets it go, before
// it changes either. When either store's entry is one opts refuses (in
// flight without opts.InFlight, completed with it, not the entry
// opts.Token names), it changes nothing and returns that refusal with
// that store's entry, the new store's first: a key completed in the new
// store and still in flight in the old one (the old store's Complete
// failed) is refused either way until the old claim ends, as its outcome
// must stay. Otherwise it purges the new store, then the old one, each
// fenced by the token of the entry it found there, in the order of
// Complete, so that whichever of a Purge and a Complete reaches the new
// store first wins in both. It returns the entry it purged (the new
// store's, when both held one), or the one that refused it, with a Token
// that names what it found in both stores, as Lookup's does. It costs a
// Lookup and a Purge per store.
//
// Between the look and the purges, an entry may go (purged by another
// call, or expired) or be claimed again. When the new store's entry has
// gone by then, the purge returns that store's answer (store.ErrNotFound,
// or store.ErrChanged) and changes nothing: another call purged it, and
// the old store's entry with it. Once the new store's entry is purged, an
// old store's entry that has gone is left as it is (another claim is left
// alone) and the purge has succeeded; an error of the old store then is
// returned, with the new store's entry purged and the old one's kept,
// which answers as Claim answers it (an outcome replayed, a claim in
// flight until its lease ends): the purge can be made again. Two purges
// fenced by one Lookup's Token purge the key once, and only one succeeds;
// without a fence, a purge that looks at the key between another's purge
// of the new store and its purge of the old one finds the old store's
// entry alone and purges it, and both succeed.
//
// A Token that is not a fence of this Store names no entry: the purge is
// refused with store.ErrChanged when either store holds the key (the old
// store's own token of its entry among such tokens), and changes nothing.
//
// With opts.Token, a fence from Lookup or List: a store that held no
// entry when it was looked at is left alone, a store whose entry a
// listing did not see is looked at now, and when the new store's entry
// that the fence names is gone it returns store.ErrNotFound. Without
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
			// Not a fence of this Store: it names no entry, so the purge
			// is refused when either store holds the key, and changes
			// nothing.
			info, err := s.Lookup(ctx, key)
			if err != nil {
				return store.Info{}, fmt.Errorf("migratestore: purge %q: %w", key, err)
			}
			return info, fmt.Errorf("migratestore: purge %q: the token is not one of this store's: %w", key, store.ErrChanged)
		}
	}
	newSeen, err := look(ctx, to, "new", key, f.newPart, opts.InFlight)
	if err != nil {
		return withToken(newSeen.info, fence{newPart: newSeen.part(), oldPart: "*"}.String()), err
	}
	oldSeen, err := look(ctx, from, "old", key, f.oldPart, opts.InFlight)
	switch {
	case errors.Is(err, store.ErrNotFound) && newSeen.found:
		// The old store's entry named by the fence has gone (expired,
		// or purged there alone): there is nothing left to purge in it.
		oldSeen = seen{}
	case err != nil:
		return withToken(oldSeen.info, fence{newPart: newSeen.part(), oldPart: oldSeen.part()}.String()), err
	}
	looked := fence{newPart: newSeen.part(), oldPart: oldSeen.part()}.String()
	if !newSeen.found && !oldSeen.found {
		return store.Info{}, fmt.Errorf("migratestore: purge %q: %w", key, store.ErrNotFound)
	}
	var purged store.Info
	if newSeen.found {
		info, err := to.Purge(ctx, key, store.PurgeOptions{InFlight: opts.InFlight, Token: newSeen.info.Token})
		if err != nil {
			// Refused (the entry went or changed since the look) or
			// failed: the old store is not touched.
			return withToken(info, looked), err
		}
		purged = info
	}
	if oldSeen.found {
		info, err := from.Purge(ctx, key, store.PurgeOptions{InFlight: opts.InFlight, Token: oldSeen.info.Token})
		switch {
		case err == nil && !newSeen.found:
			purged = info
		case err == nil:
		case !newSeen.found:
			return withToken(info, looked), err // nothing changed
		case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrChanged):
			// The entry looked at has gone since: what is there now,
			// if anything, is another claim, left alone.
		default:
			return withToken(info, looked), fmt.Errorf("migratestore: purge %q: the new store's entry is purged, the old store's is not: %w", key, err)
		}
	}
	return withToken(purged, looked), nil
}

// seen is what Purge found in one store.
type seen struct {
	info  store.Info // the entry found, or the zero Info
	found bool       // the store holds an entry to purge: info
}

// part returns the part of a fence that names what s found: "-" when it
// found nothing to purge.
func (s seen) part() string {
	if s.info.Key == "" {
		return "-"
	}
	return tokenPart(s.info.Token)
}

// look looks key up in in, the store named which, as a part of a fence
// says ("-" leaves the store alone, "*" takes any entry, "=" and a token
// the entry that token names), and returns the entry to purge, or a
// refusal of the purge with the entry found: the store's entry is in a
// state inFlight refuses, or it is not the one the part names, or it is
// gone (store.ErrNotFound) when the part names one. A key that holds no
// entry, or that the part leaves alone, is not found, without an error.
func look(ctx context.Context, in store.Inspector, which, key, p string, inFlight bool) (seen, error) {
	if p == "-" {
		return seen{}, nil
	}
	info, err := in.Lookup(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound) && p != "*":
		return seen{}, fmt.Errorf("migratestore: purge %q: the %s store's entry is gone: %w", key, which, err)
	case errors.Is(err, store.ErrNotFound):
		return seen{}, nil
	case err != nil:
		return seen{}, err
	}
	if tok, named := strings.CutPrefix(p, "="); named && info.Token != tok {
		return seen{info: info}, fmt.Errorf("migratestore: purge %q: the %s store's entry is not the one the token names: %w", key, which, store.ErrChanged)
	}
	switch {
	case (info.State == store.StateInFlight || info.State == store.StateAbandoned) && !inFlight:
		return seen{info: info}, fmt.Errorf("migratestore: purge %q: the %s store's entry is in flight: %w", key, which, store.ErrInFlight)
	case info.State == store.StateCompleted && inFlight:
		return seen{info: info}, fmt.Errorf("migratestore: purge %q: the %s store's entry is completed, not in flight: %w", key, which, store.ErrChanged)
	}
	return seen{info: info, found: true}, nil
}

// withToken returns info with the fence token as its Token, unless info
// is the zero Info.
func withToken(info store.Info, token string) store.Info {
	if info.Key != "" {
		info.Token = token
	}
	return info
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
		Abandoned: store.Count{Entries: a.Abandoned.Entries + b.Abandoned.Entries, Bytes: a.Abandoned.Bytes + b.Abandoned.Bytes},
		Estimated: a.Estimated || b.Estimated,
	}, nil
}
