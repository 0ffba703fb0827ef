package storetest_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// refStore is the simplest correct Store (one mutex, one map) with
// switches that plant one bug each, to prove the suite catches them.
type refStore struct {
	mu   sync.Mutex
	m    map[string]*refEntry
	seq  int
	bug  string
	subs []chan store.Invalidation // of Invalidations, under mu
	// touched holds, per key, the channel a planted window waits on
	// (see window); the next call that touches the key closes it.
	touched map[string]chan struct{}
}

type refEntry struct {
	state     store.State
	token     string
	winner    string // the token that completed the entry
	fp        []byte
	data      []byte
	expires   time.Time // the end of its lease, keep or retention
	keep      time.Duration
	attempt   int
	claimed   time.Time
	completed time.Time
}

// abandoned reports whether e is an in-flight entry whose lease ran out
// and whose keep has not.
func (e *refEntry) abandoned(now time.Time) bool {
	return e.state == store.StateInFlight && e.keep > 0 && !now.Before(e.expires.Add(-e.keep))
}

// shown is e's state as the store reports it.
func (e *refEntry) shown() store.State {
	if e.abandoned(time.Now()) {
		return store.StateAbandoned
	}
	return e.state
}

func newRefStore(bug string) *refStore {
	return &refStore{m: map[string]*refEntry{}, bug: bug, touched: map[string]chan struct{}{}}
}

// windowTimeout ends a planted window that no other call enters, so that a
// suite case that never races the call fails to catch the bug (and
// TestSuiteCatchesBugs says so) instead of hanging. No case catches a bug
// through it: a racing call ends the window long before.
const windowTimeout = 10 * time.Second

// touch records, under mu, a call on key: it ends every window open on
// the key. Every call on one key calls it first.
func (s *refStore) touch(key string) {
	if ch := s.touched[key]; ch != nil {
		close(ch)
		delete(s.touched, key)
	}
}

// window is the gap that a bug of the read-then-write kind leaves between
// reading an entry and writing it: it lets go of mu until another call has
// touched key since, then takes mu again. Holding the gap open until the
// racing call has come in, instead of for a while, makes every suite case
// that races two calls on one key catch such a bug on every run, whatever
// the scheduler does; a case that never races them does not.
func (s *refStore) window(key string) {
	ch := s.touched[key]
	if ch == nil {
		ch = make(chan struct{})
		s.touched[key] = ch
	}
	s.mu.Unlock()
	timeout := time.NewTimer(windowTimeout)
	select {
	case <-ch:
	case <-timeout.C:
	}
	timeout.Stop()
	s.mu.Lock()
	s.touch(key)
}

func (s *refStore) live(key string) *refEntry {
	e := s.m[key]
	if e != nil && (s.bug == "never-expires" || time.Now().Before(e.expires)) {
		return e
	}
	delete(s.m, key)
	return nil
}

func (s *refStore) Claim(ctx context.Context, key string, fp []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	if err := s.cancelled(ctx); err != nil {
		return store.ClaimResult{}, err
	}
	if opts.Keep < 0 && s.bug != "negative-keep" {
		return store.ClaimResult{}, errors.New("negative keep")
	}
	s.mu.Lock()
	s.touch(key)
	e := s.live(key)
	attempt, previous := 1, time.Time{}
	if e != nil {
		takeOver := opts.TakeOver && e.shown() == store.StateAbandoned && (bytes.Equal(e.fp, fp) || s.bug == "takeover-any-fingerprint")
		if s.bug == "takeover-live" && opts.TakeOver && e.state == store.StateInFlight {
			takeOver = true
		}
		if s.bug == "claim-overwrites" { // a SET without NX
			takeOver = true
		}
		if !takeOver {
			// Read under the lock: a Complete may write the entry right after.
			x := store.Entry{State: e.shown(), Fingerprint: e.fp, Data: e.data}
			s.mu.Unlock()
			switch s.bug {
			case "echo-fingerprint":
				x.Fingerprint = fp
			case "inflight-empty-data":
				if x.Data == nil {
					x.Data = []byte{}
				}
			case "truncate-data":
				x.Data = x.Data[:min(len(x.Data), 1<<20)]
			}
			return store.ClaimResult{Existing: x}, nil
		}
		attempt, previous = e.attempt+1, e.claimed
		if s.bug == "takeover-attempt-one" {
			attempt = 1
		}
	}
	if s.bug == "read-then-write" {
		s.window(key)
	}
	s.seq++
	tok := strconv.Itoa(s.seq)
	if s.bug == "token-per-key" { // fresh per claim of a key, not per claim
		tok = "t:" + key
	}
	if s.bug == "constant-token" || s.bug == "takeover-keeps-token" && e != nil {
		tok = "t"
		if e != nil {
			tok = e.token
		}
	}
	stored := fp
	if s.bug != "keep-fingerprint" {
		stored = bytes.Clone(fp)
	}
	keep := opts.Keep
	if e != nil && s.bug != "takeover-new-keep" { // a take-over keeps the entry's keep
		keep = e.keep
	}
	if s.bug == "keep-ignored" {
		keep = 0
	}
	now := time.Now()
	s.m[key] = &refEntry{state: store.StateInFlight, token: tok, fp: stored, expires: now.Add(lease + keep), keep: keep, attempt: attempt, claimed: now}
	s.mu.Unlock()
	c := store.ClaimResult{Token: tok, Attempt: attempt, Previous: previous}
	if s.bug == "winner-existing" {
		c.Existing = store.Entry{State: store.StateInFlight, Fingerprint: fp}
	}
	return c, nil
}

// owned returns the entry token owns, or nil.
func (s *refStore) owned(key, token string, op string) *refEntry {
	e := s.m[key]
	if s.bug != "expired-owner-ok" {
		e = s.live(key)
	}
	if e == nil {
		return nil
	}
	if s.bug == op+"-ignores-token" && e.state == store.StateInFlight {
		return e
	}
	if s.bug == "empty-token-completed" && token == e.token {
		return e
	}
	if e.state != store.StateInFlight || e.token != token {
		return nil
	}
	return e
}

func (s *refStore) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	if err := s.cancelled(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key)
	e := s.owned(key, token, "complete")
	if e == nil {
		if d, ok := s.m[key]; ok && d.state == store.StateCompleted && d.winner == token && token != "" {
			return nil // a retried Complete of the same owner
		}
		if s.bug != "complete-creates" {
			return store.ErrLeaseLost
		}
		e = &refEntry{}
		s.m[key] = e
	}
	if s.bug != "no-copy-data" {
		data = bytes.Clone(data)
	}
	e.state, e.data, e.winner, e.completed = store.StateCompleted, data, token, time.Now()
	if s.bug != "empty-token-completed" {
		e.token = "-"
	} else {
		e.token = ""
	}
	if s.bug != "complete-keeps-lease" {
		e.expires = time.Now().Add(retention)
	}
	return nil
}

func (s *refStore) Release(ctx context.Context, key, token string) error {
	if err := s.cancelled(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key)
	if s.owned(key, token, "release") == nil {
		if e := s.m[key]; e != nil && s.bug == "release-deletes-completed" && e.state == store.StateCompleted {
			delete(s.m, key)
			return nil
		}
		if s.live(key) == nil && s.bug != "release-free-lease-lost" {
			return nil // nothing left to release
		}
		return store.ErrLeaseLost
	}
	delete(s.m, key)
	return nil
}

func (s *refStore) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	if err := s.cancelled(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key)
	e := s.owned(key, token, "extend")
	if e == nil || e.abandoned(time.Now()) && s.bug != "extend-revives" {
		return store.ErrLeaseLost
	}
	switch s.bug {
	case "extend-no-effect":
	case "extend-only-longer":
		e.expires = later(e.expires, time.Now().Add(lease+e.keep))
	default:
		e.expires = time.Now().Add(lease + e.keep)
	}
	return nil
}

func (s *refStore) Abandon(ctx context.Context, key, token string) error {
	if err := s.cancelled(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch(key)
	e := s.owned(key, token, "abandon")
	switch {
	case e == nil:
		return store.ErrLeaseLost
	case e.keep == 0:
		delete(s.m, key)
	case !e.abandoned(time.Now()):
		e.expires = time.Now().Add(e.keep)
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// cancelled is how the reference store treats a cancelled context: it
// refuses the call. The bugs get it wrong.
func (s *refStore) cancelled(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	switch s.bug {
	case "cancel-wrong-error":
		return errors.New("gave up")
	case "cancel-panics":
		panic("cancelled")
	}
	return ctx.Err()
}
