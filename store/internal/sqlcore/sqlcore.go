// Package sqlcore holds the logic the SQL stores (store/mysqlstore,
// store/postgresstore, store/sqlitestore) share: the sweeper's schedule, the keyset cursor and
// page of List, the reading of an inspected row and the checks of Purge.
// Each store keeps its dialect (its statements and its driver) in its own
// package; what is here is plain Go on the standard library and the store
// package, so it adds no dependency to the core module.
package sqlcore

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// The states of a row, as both stores' tables write them.
const (
	StateInFlight  = 1
	StateCompleted = 2
)

// StateAbandoned is the state a store's Stats statement reports for an
// in-flight row whose lease ran out and whose keep has not: no table
// writes it (an abandoned row is in flight, and [Row.Abandoned] says
// so), but counting by it puts abandoned rows apart.
const StateAbandoned = 3

// SweepLoop runs until ctx ends: every interval (with jitter), it calls
// sweep batch after batch until one comes back short (fewer rows than
// batch) or the next run is due, and gives report, if not nil, each
// batch's result (once ctx has ended, only a batch that deleted rows).
func SweepLoop(ctx context.Context, interval time.Duration, batch int, sweep func(context.Context) (int64, error), report func(int64, error)) {
	every(ctx, func() time.Duration { return Jitter(interval) }, func() bool {
		due := time.Now().Add(interval)
		for ctx.Err() == nil && time.Now().Before(due) {
			n, err := sweep(ctx)
			// A batch that deleted rows is reported even when the store
			// was closed meanwhile: its rows are gone.
			stopped := ctx.Err() != nil
			if report != nil && (!stopped || n > 0) {
				report(n, err)
			}
			if stopped {
				return false
			}
			if err != nil || n < int64(batch) {
				break
			}
		}
		return true
	})
}

// every calls run after each wait (a new one after each run returned)
// until ctx ends or run returns false.
func every(ctx context.Context, wait func() time.Duration, run func() bool) {
	t := time.NewTimer(wait())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !run() {
			return
		}
		t.Reset(wait())
	}
}

// Jitter returns d plus up to 10% of random jitter.
func Jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

// FailedClaimRelease bounds the release after a failed claim.
const FailedClaimRelease = 500 * time.Millisecond

// ReleaseFailedClaim deletes the claim of token, if it landed, with
// release under a context of its own bounded by [FailedClaimRelease]. It
// is best effort: its error is dropped, since the claim's own error is
// reported.
func ReleaseFailedClaim(ctx context.Context, release func(ctx context.Context) error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FailedClaimRelease)
	defer cancel()
	_ = release(rctx)
}

// Row is a row as the inspection statements read it.
type Row struct {
	Key         []byte
	State       int64
	Token       []byte
	Fingerprint []byte
	Data        []byte
	Expires     time.Time
	Size        int64
	// Abandoned is true for an in-flight row whose lease ran out and
	// whose keep has not, as the statement judged it.
	Abandoned bool
	// Attempt is the row's attempt count; 0 when the store does not
	// keep one.
	Attempt int64
}

// Info describes r; pkg (the store's package name) and table name it in
// the error of a row of an unknown state.
func Info(pkg, table string, r Row) (store.Info, error) {
	i := store.Info{
		Key:         string(r.Key),
		Token:       string(r.Token),
		Fingerprint: r.Fingerprint,
		Size:        r.Size,
		Expires:     r.Expires,
		Attempt:     int(r.Attempt),
	}
	if i.Fingerprint == nil {
		i.Fingerprint = []byte{}
	}
	switch r.State {
	case StateInFlight:
		i.State = store.StateInFlight
		if r.Abandoned {
			i.State = store.StateAbandoned
		}
	case StateCompleted:
		i.State = store.StateCompleted
		i.Data = r.Data
		if i.Data == nil {
			i.Data = []byte{}
		}
	default:
		return store.Info{}, fmt.Errorf("%s: key %x in %s: unknown state %d: %w", pkg, r.Key, table, r.State, store.ErrCorrupt)
	}
	i.Claimed, _ = store.TokenTime(i.Token)
	return i, nil
}

// PurgeRefusal returns why Purge with opts may not delete the entry info
// describes (store.ErrChanged, store.ErrInFlight), or nil when it may.
func PurgeRefusal(info store.Info, opts store.PurgeOptions) error {
	switch {
	case opts.Token != "" && info.Token != opts.Token:
		return store.ErrChanged
	case (info.State == store.StateInFlight || info.State == store.StateAbandoned) && !opts.InFlight:
		return store.ErrInFlight
	case info.State == store.StateCompleted && opts.InFlight:
		return store.ErrChanged
	}
	return nil
}

// Cursor reads and writes the keyset cursors of a store's List: the
// prefix, which names the store and the cursor's version, then the hex of
// the last key read.
type Cursor struct {
	Pkg    string // the store's package name, for errors
	Prefix string // "m1:", "p1:"
}

// Parse reads a cursor of List: the key to read after, or first for "",
// the start of a walk.
func (c Cursor) Parse(s string) (after []byte, first bool, err error) {
	if s == "" {
		return nil, true, nil
	}
	h, ok := strings.CutPrefix(s, c.Prefix)
	if ok {
		if after, err = hex.DecodeString(h); err == nil {
			return after, false, nil
		}
	}
	return nil, false, fmt.Errorf("%s: list cursor %q: %w", c.Pkg, s, store.ErrCursor)
}

// Page builds one page of List from the rows one statement read, in key
// order, at most Limit of them.
type Page struct {
	Pkg, Table string
	Cursor     Cursor
	Limit      int
	Opts       store.ListOptions
	Now        time.Time

	page store.Page
	n    int
	last []byte
}

// Add takes the next row read; live tells whether it is live. A row of
// an unknown state is skipped: Lookup reports it.
func (p *Page) Add(r Row, live bool) {
	p.n, p.last = p.n+1, r.Key
	info, err := Info(p.Pkg, p.Table, r)
	if err != nil || !live {
		return
	}
	info.Data = nil
	if p.Opts.Matches(info, p.Now) {
		p.page.Entries = append(p.page.Entries, info)
	}
}

// Page returns the page, with the cursor of the next when the statement
// read a full one.
func (p *Page) Page() store.Page {
	if p.n == p.Limit {
		p.page.Next = p.Cursor.Prefix + hex.EncodeToString(p.last)
	}
	return p.page
}

// AddStats counts c, read for state (StateInFlight, StateCompleted or
// StateAbandoned), in st.
func AddStats(st *store.Stats, state int64, c store.Count) {
	switch state {
	case StateInFlight:
		st.InFlight = c
	case StateCompleted:
		st.Completed = c
	case StateAbandoned:
		st.Abandoned = c
	}
}

// Ended returns the error of a CompleteTx whose context ended: the
// context's error, wrapping its cause as well when it has one of its own.
// The interceptor cancels a handler's context with a cause matching
// [store.ErrLeaseLost] when the claim was lost (taken over, or its lease
// ran out unrenewed), so that CompleteTx then reports the lost lease, as
// it would had the UPDATE run and found the claim gone.
func Ended(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err { //nolint:errorlint // identity: a cause that is the context's error itself adds nothing
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}
