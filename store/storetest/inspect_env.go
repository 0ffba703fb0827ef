package storetest

import (
	"bytes"
	"errors"
	"strings"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// clockSlack is how far the times an Inspector reports may be from the
// times the suite measures around the step that set them: the suite's
// clock, a server's and a database's may differ a little, and a store may
// round (Redis keeps milliseconds).
const clockSlack = time.Second

// maxPages bounds a walk of List: a store whose cursor never ends fails
// instead of hanging.
const maxPages = 100_000

// inspector returns the store as a store.Inspector. It fails the case
// when the store is not one, and skips it under WithoutInspection.
func (e *env) inspector() store.Inspector {
	e.t.Helper()
	in, ok := e.s.(store.Inspector)
	switch {
	case ok:
		return in
	case e.notInspectable:
		e.t.Skip("the store does not implement store.Inspector (WithoutInspection)")
	default:
		e.t.Fatalf("%T does not implement store.Inspector: every store must (Lookup, List, Purge, Stats); pass storetest.WithoutInspection() only for a store that cannot", e.s)
	}
	return nil
}

// lookup looks key up and fails the case on error.
func (e *env) lookup(key string) store.Info {
	e.t.Helper()
	info, err := e.inspector().Lookup(e.ctx, key)
	if err != nil {
		e.t.Fatalf("Lookup(%q) of a live entry: %v", key, err)
	}
	if info.Key != key {
		e.t.Fatalf("Lookup(%q) returned the Info of key %q", key, info.Key)
	}
	return info
}

// wantErr fails the case unless err matches target.
func (e *env) wantErr(op string, err, target error) {
	e.t.Helper()
	if !errors.Is(err, target) {
		e.t.Fatalf("%s: got error %v, want one matching %v", op, err, target)
	}
}

// wantInfo fails the case unless info describes an entry in state with
// fingerprint fp and data (nil for an in-flight entry, or in a listing),
// claimed between claimedFrom and claimedTo and expiring ttl after a time
// in that range or after completion, when completed.
func (e *env) wantInfo(what string, info store.Info, state store.State, fp, data []byte, claimed, completed span, ttl time.Duration) {
	e.t.Helper()
	if info.State != state || !bytes.Equal(info.Fingerprint, fp) {
		e.t.Fatalf("%s: %s fingerprint=%s, want %s with fingerprint %s", what, info.State, head(info.Fingerprint), state, head(fp))
	}
	if !bytes.Equal(info.Data, data) || (data == nil && info.Data != nil) {
		e.t.Fatalf("%s: data %s, want %s", what, head(info.Data), head(data))
	}
	if info.Token == "" {
		e.t.Fatalf("%s: empty Token", what)
	}
	if least := int64(len(info.Key) + len(fp) + len(data)); info.Size < least {
		e.t.Fatalf("%s: Size %d, under the %d bytes of its key, fingerprint and data", what, info.Size, least)
	}
	if !info.Claimed.IsZero() {
		claimed.want(e, what+": Claimed", info.Claimed, 0)
	}
	set := claimed
	switch state {
	case store.StateInFlight:
		if !info.Completed.IsZero() {
			e.t.Fatalf("%s: in flight, but Completed is %v", what, info.Completed)
		}
	case store.StateCompleted:
		set = completed
		if !info.Completed.IsZero() {
			completed.want(e, what+": Completed", info.Completed, 0)
		}
	}
	set.want(e, what+": Expires", info.Expires, ttl)
}

// span is the time from just before a step to just after it.
type span struct{ from, to time.Time }

// around runs f and returns the span it took.
func around(f func()) span {
	from := time.Now()
	f()
	return span{from, time.Now()}
}

// want fails the case unless at is d after a time within s, give or take
// clockSlack.
func (s span) want(e *env, what string, at time.Time, d time.Duration) {
	e.t.Helper()
	lo, hi := s.from.Add(d-clockSlack), s.to.Add(d+clockSlack)
	if at.Before(lo) || at.After(hi) {
		e.t.Fatalf("%s = %v, want one from %v to %v", what, at, lo, hi)
	}
}

// walk lists every page of opts from its start and returns the entries of
// the keys that start with prefix (the suite's stores may be shared with
// other cases). It checks that each page holds at most twice the limit
// (a page ends at a step of the store's own, such as a Redis SCAN) and
// carries no data.
func (e *env) walk(prefix string, opts store.ListOptions) []store.Info {
	e.t.Helper()
	in := e.inspector()
	limit := opts.Limit
	if limit == 0 {
		limit = store.DefaultListLimit
	}
	var got []store.Info
	opts.Cursor = ""
	for pages := 0; ; pages++ {
		if pages == maxPages {
			e.t.Fatalf("List: no end after %d pages", maxPages)
		}
		page, err := in.List(e.ctx, opts)
		if err != nil {
			e.t.Fatalf("List(%+v): %v", opts, err)
		}
		if len(page.Entries) > 2*limit {
			e.t.Fatalf("List with limit %d: a page of %d entries", limit, len(page.Entries))
		}
		for _, info := range page.Entries {
			if info.Data != nil {
				e.t.Fatalf("List: entry %q carries data %s; a listing has none", info.Key, head(info.Data))
			}
			if strings.HasPrefix(info.Key, prefix) {
				got = append(got, info)
			}
		}
		if page.Next == "" {
			return got
		}
		if !store.ShellSafe(page.Next) {
			e.t.Fatalf("List gave the cursor %q, which is not one shell word (store.ShellSafe)", page.Next)
		}
		opts.Cursor = page.Next
	}
}
