package storetest

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// listCases are the cases of store.Inspector.List.
func listCases() []testCase {
	return []testCase{
		{"ListWalksEveryEntry", listWalksEveryEntry},
		{"ListLimits", func(t *testing.T, e *env) {
			in := e.inspector()
			for _, limit := range []int{-1, store.MaxListLimit + 1} {
				if _, err := in.List(e.ctx, store.ListOptions{Limit: limit}); err == nil {
					t.Fatalf("List with limit %d: no error", limit)
				}
			}
			if _, err := in.List(e.ctx, store.ListOptions{Limit: store.MaxListLimit}); err != nil {
				t.Fatalf("List with limit %d: %v", store.MaxListLimit, err)
			}
			for _, cursor := range []string{"storetest: not a cursor", "\x00\xff"} {
				_, err := in.List(e.ctx, store.ListOptions{Cursor: cursor})
				e.wantErr("List with a cursor the store did not make", err, store.ErrCursor)
			}
		}},
	}
}

// listWalksEveryEntry makes three in-flight and three completed entries
// and walks the store with small pages: by state, by age and unfiltered,
// each cursor one shell word ([store.ShellSafe]); then it purges each with
// the Token the walk gave. The store may be shared with other cases, whose
// keys are left out.
func listWalksEveryEntry(t *testing.T, e *env) {
	prefix := e.key() + "/"
	type made struct {
		state   store.State
		fp      []byte
		claimed span
	}
	want := map[string]made{}
	tokens := map[string]string{} // as List gave them
	for i := range 6 {
		key, fp := prefix+strconv.Itoa(i), fingerprint()
		var tok string
		claimed := around(func() { tok = e.claimWin(key, fp, longTTL) })
		state := store.StateInFlight
		if i%2 == 1 {
			e.complete(key, tok, randomData(50))
			state = store.StateCompleted
		}
		want[key] = made{state, fp, claimed}
	}
	for _, tc := range []struct {
		name string
		opts store.ListOptions
		keep func(made) bool
	}{
		{"every entry", store.ListOptions{Limit: 7}, func(made) bool { return true }},
		{"pages of 5", store.ListOptions{Limit: 5}, func(made) bool { return true }},
		{"in flight", store.ListOptions{Limit: 7, State: store.StateInFlight}, func(m made) bool { return m.state == store.StateInFlight }},
		{"completed", store.ListOptions{Limit: 7, State: store.StateCompleted}, func(m made) bool { return m.state == store.StateCompleted }},
		{"claimed an hour ago", store.ListOptions{Limit: 7, MinAge: time.Hour}, func(made) bool { return false }},
		{"default limit", store.ListOptions{}, func(made) bool { return true }},
	} {
		seen := map[string]bool{}
		for _, info := range e.walk(prefix, tc.opts) {
			m, ok := want[info.Key]
			if !ok {
				t.Fatalf("%s: List returned %q, which the case never made", tc.name, info.Key)
			}
			if !tc.keep(m) && !(tc.opts.MinAge > 0 && info.Claimed.IsZero()) {
				t.Fatalf("%s: List returned %q (%s, claimed %v), which the options leave out", tc.name, info.Key, info.State, info.Claimed)
			}
			if info.State != m.state || !bytes.Equal(info.Fingerprint, m.fp) || info.Token == "" {
				t.Fatalf("%s: List returned %q as %s fingerprint=%s token %q; want %s fingerprint=%s and a token",
					tc.name, info.Key, info.State, head(info.Fingerprint), info.Token, m.state, head(m.fp))
			}
			tokens[info.Key] = info.Token
			if !info.Claimed.IsZero() {
				m.claimed.want(e, tc.name+": Claimed of "+info.Key, info.Claimed, 0)
			}
			if info.Expires.IsZero() || info.Size < int64(len(info.Key)+len(m.fp)) {
				t.Fatalf("%s: List returned %q with Expires %v and Size %d", tc.name, info.Key, info.Expires, info.Size)
			}
			seen[info.Key] = true
		}
		for key, m := range want {
			if tc.keep(m) && !seen[key] {
				t.Fatalf("%s: the walk never returned %q (%s)", tc.name, key, m.state)
			}
		}
	}
	// A Token from List fences a Purge as one from Lookup does.
	for key, m := range want {
		_, err := e.inspector().Purge(e.ctx, key, store.PurgeOptions{InFlight: m.state == store.StateInFlight, Token: tokens[key]})
		e.ok("Purge fenced by the Token List gave", err)
		e.wantFree(key)
	}
}
