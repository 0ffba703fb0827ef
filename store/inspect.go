package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Inspector is implemented by a Store that lets an operator look up, list,
// purge and count its entries: what an admin service or a command line
// needs to answer "a customer says they were charged twice: what happened
// to this key?" and to repair it. Every store of this repository
// implements it, and the conformance suite runs its cases against every
// store that it is given.
//
// It takes store keys, as [Store] does: the keys the interceptor derives
// from the clients' keys, not the clients' keys themselves. None of its
// methods is on the request path; the interceptor never calls them, and
// implementing them costs Claim, Complete, Release and Extend nothing.
// Implementations are safe for concurrent use.
type Inspector interface {
	// Lookup returns the live entry under key, with its data, read in one
	// atomic step (one round trip on a networked store). It returns an
	// error wrapping [ErrNotFound] when key holds no live entry: never
	// claimed, released, purged, or its lease or retention ran out. It
	// returns an error wrapping [ErrCorrupt] when the value under key
	// cannot be read. The Fingerprint and Data of the Info are the
	// caller's: they share nothing with the store.
	Lookup(ctx context.Context, key string) (Info, error)

	// List returns one page of the store's live entries, without their
	// data, in the store's own order (not by age: each store's
	// documentation says which), keeping those that opts selects: of
	// opts.State when it is set, and claimed at least opts.MinAge ago when
	// it is positive (an entry whose claim time is unknown is kept
	// whatever MinAge is: it may be old).
	//
	// A page examines about opts.Limit entries at most (see
	// [ListOptions.PageSize]) and holds those that match, so one call never
	// walks the whole store: a page may hold fewer entries than the limit,
	// or none at all, and still have a [Page.Next] cursor. Passing Next back
	// in opts.Cursor, with the same State and MinAge, gives the next page;
	// Next is empty once the walk is over. A walk returns at least once
	// every entry that stayed live from its first page to its last; an
	// entry claimed, removed or moved within the store during the walk may
	// be listed or not, and may be listed twice.
	//
	// It returns an argument error for a Limit out of range, and an error
	// wrapping [ErrCursor] for a cursor this store did not make.
	List(ctx context.Context, opts ListOptions) (Page, error)

	// Purge deletes the live entry under key in one atomic step, fenced by
	// opts, and returns it as it was, with its data.
	//
	// By default it deletes a completed entry only: an entry in flight is
	// left alone, with an error wrapping [ErrInFlight]. With opts.InFlight
	// it deletes an in-flight entry only; a completed one is left alone,
	// with an error wrapping [ErrChanged] (its handler completed since it
	// was looked at, and deleting the outcome would let a retry run the
	// handler again). With opts.Token set, it deletes the entry only while
	// it is the one that token names ([Info.Token], as Lookup or List
	// reported it), and returns an error wrapping ErrChanged otherwise: an
	// entry purged and claimed again since it was looked at is another
	// entry. A refused purge changes nothing and returns the entry it
	// found; a key that holds no live entry gives an error wrapping
	// [ErrNotFound] and the zero Info.
	//
	// Once an in-flight entry is purged, its owner's Complete and Extend
	// return [ErrLeaseLost] and its Release returns nil, as after its
	// lease ran out: the handler's outcome is not stored, and a retry runs
	// the handler again. Purge an in-flight key only when its handler is
	// known to be gone.
	//
	// A store that is also an [Invalidator] tells every subscriber, on
	// every instance, once the entry is deleted.
	Purge(ctx context.Context, key string, opts PurgeOptions) (Info, error)

	// Stats counts the live entries and their bytes, by state. Its cost,
	// and whether its figures are exact or estimated ([Stats.Estimated]),
	// depend on the store: each store's documentation states both. It is
	// meant for an operator, or a metrics scrape every minute or so, not
	// for the request path.
	Stats(ctx context.Context) (Stats, error)
}

// Info describes one entry of a store, as [Inspector.Lookup],
// [Inspector.List] and [Inspector.Purge] report it.
type Info struct {
	// Key is the store key.
	Key string
	// State is StateInFlight, StateAbandoned or StateCompleted.
	State State
	// Token names the claim that made the entry: opaque, unique to that
	// claim, and given back in [PurgeOptions.Token] to purge this very
	// entry and no other. (It is the claim's owner token, the token that
	// completed the entry once it is completed, or derived from it: keep
	// it from anyone who may not act on the store.) For an entry in
	// flight or abandoned, [Store.Complete] under Token completes that
	// very entry (Token is its owner token, or names it): an operator
	// resolves an abandoned entry so, and it fails once anyone has taken
	// the entry over.
	Token string
	// Fingerprint is the fingerprint the key was claimed with.
	Fingerprint []byte
	// Data is the stored outcome: nil while in flight, and in the
	// entries of a [Page].
	Data []byte
	// Size is the bytes the store keeps for the entry, as its
	// documentation counts them (its key, token, fingerprint and data,
	// without the backend's overhead per entry).
	Size int64
	// Claimed is when the entry was claimed; the zero Time when the store
	// does not know (an entry claimed by an earlier release of a store).
	// The store's documentation says whose clock it is.
	Claimed time.Time
	// Completed is when the entry was completed; the zero Time while in
	// flight, and when the store does not record it.
	Completed time.Time
	// Expires is when its lease (in flight), its keep (abandoned) or its
	// retention (completed) runs out, by the store's clock; a time far in
	// the future for a duration the store saturated.
	Expires time.Time
	// Attempt counts the claims of the key that ran a handler (see
	// [ClaimResult.Attempt]); 0 when the store does not know (a completed
	// entry of a store that does not keep it).
	Attempt int
}

// Page limits of [Inspector.List].
const (
	// DefaultListLimit is the page size of a [ListOptions] whose Limit is
	// zero.
	DefaultListLimit = 100
	// MaxListLimit is the largest Limit a [ListOptions] may ask for.
	MaxListLimit = 1000
)

// ListOptions selects the entries of [Inspector.List].
type ListOptions struct {
	// State keeps the entries in that state; 0 keeps every state.
	State State
	// MinAge keeps the entries claimed at least that long ago, and those
	// whose claim time is unknown; 0 or less keeps every entry.
	MinAge time.Duration
	// Cursor is the Next of the previous page; "" starts a walk.
	Cursor string
	// Limit is about how many entries a page examines at most, from 1 to
	// MaxListLimit; 0 means DefaultListLimit. A page holds at most the
	// entries it examined that match.
	Limit int
}

// PageSize returns the page size o asks for: DefaultListLimit for a Limit
// of 0, Limit itself from 1 to MaxListLimit, and an argument error
// otherwise.
func (o ListOptions) PageSize() (int, error) {
	switch {
	case o.Limit == 0:
		return DefaultListLimit, nil
	case o.Limit < 0 || o.Limit > MaxListLimit:
		return 0, fmt.Errorf("store: list limit %d is not between 1 and %d", o.Limit, MaxListLimit)
	}
	return o.Limit, nil
}

// Matches reports whether o keeps the entry i at time now: i.State is
// o.State (any state when o.State is 0), and i was claimed at least
// o.MinAge before now, or its claim time is unknown.
func (o ListOptions) Matches(i Info, now time.Time) bool {
	if o.State != 0 && i.State != o.State {
		return false
	}
	return o.MinAge <= 0 || i.Claimed.IsZero() || now.Sub(i.Claimed) >= o.MinAge
}

// Page is one page of [Inspector.List].
type Page struct {
	// Entries are the entries of the page that match, without their Data.
	Entries []Info
	// Next is the cursor of the next page; "" when the walk is over. It is
	// opaque, and a shell word as it is ([ShellSafe]), so that a person
	// can paste it on a command line.
	Next string
}

// ShellSafe reports whether s is a cursor that a shell reads as one word,
// as it is written: a letter or a digit, then ASCII letters, digits and
// the characters - _ . : / + = only. Every [Page.Next] of a store is
// ShellSafe.
func ShellSafe(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && strings.IndexByte("-_.:/+=", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// PurgeOptions fences [Inspector.Purge].
type PurgeOptions struct {
	// InFlight purges an in-flight or abandoned entry, and only such an
	// entry: purging an abandoned one lets the next retry run its handler
	// afresh. By default, only a completed entry is purged.
	InFlight bool
	// Token, when set, purges the entry only while it is the one whose
	// [Info.Token] it is.
	Token string
}

// Stats are the counts of [Inspector.Stats].
type Stats struct {
	// InFlight, Abandoned and Completed count the live entries in each
	// state.
	InFlight, Abandoned, Completed Count
	// Estimated is true when the counts are estimated from a sample
	// rather than counted; each store's documentation says how.
	Estimated bool
}

// Count is the number of entries in one state and their bytes
// ([Info.Size]).
type Count struct {
	Entries int64
	Bytes   int64
}
