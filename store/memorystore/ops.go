package memorystore

import (
	"bytes"
	"context"
	"math"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// Claim implements [store.Store.Claim]. It never blocks on anything but
// shards' mutexes, so it ignores ctx. The Fingerprint and Data of a
// returned Existing entry are shared with the store: do not modify them.
// It returns an error when lease is not positive or opts.Keep is negative,
// and [store.ErrFull] when the store is bounded by [WithMaxEntries], full,
// and holds nothing that has expired. A take-over replaces the abandoned
// entry in place, needing no room.
func (s *Store) Claim(_ context.Context, key string, fingerprint []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	if lease <= 0 {
		return store.ClaimResult{}, errLease
	}
	if opts.Keep < 0 {
		return store.ClaimResult{}, errKeep
	}
	st := s.st
	sh, idx := st.shard(key)
	for held := false; ; held = true {
		now := st.now()
		sh.mu.Lock()
		old, found := sh.m[key]
		if found && old.expires > now {
			state := old.shown(now)
			if opts.TakeOver && state == store.StateAbandoned && bytes.Equal(old.fingerprint, fingerprint) {
				c := st.takeOver(sh, idx, key, old, now, lease)
				st.giveBack(held)
				sh.mu.Unlock()
				return c, nil
			}
			st.giveBack(held)
			sh.mu.Unlock()
			return store.ClaimResult{Existing: store.Entry{State: state, Fingerprint: old.fingerprint, Data: old.data}}, nil
		}
		var expired *entry // under key, replaced in place
		if found {
			expired = &old
		}
		token, ok := st.insert(sh, idx, key, expired, fingerprint, now, lease, opts.Keep, held)
		sh.mu.Unlock()
		if ok {
			return store.ClaimResult{Token: formatToken(token), Attempt: 1}, nil
		}
		if held || !st.makeRoom(idx) {
			return store.ClaimResult{}, store.ErrFull
		}
		// The key may have been claimed meanwhile: look again.
	}
}

// takeOver gives old, the abandoned entry under key, a new owner token
// and a new lease, keeping its keep, and returns the won claim. The
// caller holds sh.mu.
func (st *state) takeOver(sh *shard, idx uint64, key string, old entry, now int64, lease time.Duration) store.ClaimResult {
	keep := old.keep()
	sh.seq++
	e := old
	e.token = sh.seq<<shardBits | idx
	e.claimed = now
	e.completed = deadline(now, lease)
	e.expires = deadline(e.completed, keep)
	e.attempt = old.attempt + 1
	if e.attempt == 0 {
		e.attempt = math.MaxUint16
	}
	sh.put(key, e)
	return store.ClaimResult{Token: formatToken(e.token), Attempt: int(e.attempt), Previous: st.wall(old.claimed)}
}

// insert stores a new in-flight entry under key, with the given lease and
// keep, and returns its owner token. expired is the expired entry under
// key, which it replaces in place, or nil when key holds none. It reports
// false when the entry would overflow a bounded store. held says the
// caller already holds room for the entry, from makeRoom. The caller holds
// sh.mu.
func (st *state) insert(sh *shard, idx uint64, key string, expired *entry, fingerprint []byte, now int64, lease, keep time.Duration, held bool) (token uint64, ok bool) {
	if expired == nil && !held && st.bounded() && !st.reserve() {
		return 0, false
	}
	sh.seq++
	token = sh.seq<<shardBits | idx
	e := entry{
		fingerprint: clone(fingerprint),
		expires:     deadline(now, lease),
		claimed:     now,
		token:       token,
		attempt:     1,
		state:       store.StateInFlight,
	}
	if keep > 0 {
		e.completed = e.expires // the end of its lease
		e.expires = deadline(e.completed, keep)
	}
	if expired != nil { // replaced in place: no room needed
		st.reuse(held)
		e.slot = expired.slot
		sh.untally(key, expired)
		sh.put(key, e)
	} else {
		sh.add(key, e)
	}
	sh.live[store.StateInFlight-1].add(1, int64(len(key)+len(e.fingerprint)))
	return token, true
}

// Complete implements [store.Store.Complete]. It copies data before taking
// the shard's lock and ignores ctx. It returns an error when retention is
// not positive.
func (s *Store) Complete(_ context.Context, key, token string, data []byte, retention time.Duration) error {
	if retention <= 0 {
		return errRetention
	}
	tok, ok := parseToken(token)
	if !ok {
		return store.ErrLeaseLost
	}
	data = clone(data)
	st := s.st
	sh, _ := st.shard(key)
	now := st.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, owned := st.owned(sh, key, tok, now)
	if !owned {
		if e.state == store.StateCompleted && e.token == tok {
			return nil // a retried Complete of the same owner
		}
		return store.ErrLeaseLost
	}
	e.state, e.data = store.StateCompleted, data // e.token stays: it completed the entry
	e.expires, e.completed = deadline(now, retention), now
	sh.put(key, e)
	held := int64(len(key) + len(e.fingerprint)) // an in-flight entry holds no data
	sh.live[store.StateInFlight-1].add(-1, -held)
	sh.live[store.StateCompleted-1].add(1, held+int64(len(data)))
	return nil
}

// Release implements [store.Store.Release]. It ignores ctx. A key that
// holds no live entry has nothing left to release: nil, whatever the
// token, even one this store cannot have issued.
func (s *Store) Release(_ context.Context, key, token string) error {
	tok, valid := parseToken(token)
	st := s.st
	sh, _ := st.shard(key)
	now := st.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, owned := st.owned(sh, key, tok, now)
	switch {
	case valid && owned:
		st.remove(sh, key, e)
		return nil
	case e.state == 0: // no live entry
		return nil
	}
	return store.ErrLeaseLost
}

// Extend implements [store.Store.Extend]. It ignores ctx, and returns an
// error when lease is not positive. An abandoned entry stays abandoned.
func (s *Store) Extend(_ context.Context, key, token string, lease time.Duration) error {
	if lease <= 0 {
		return errLease
	}
	tok, ok := parseToken(token)
	if !ok {
		return store.ErrLeaseLost
	}
	st := s.st
	sh, _ := st.shard(key)
	now := st.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, owned := st.owned(sh, key, tok, now)
	if !owned || e.shown(now) == store.StateAbandoned {
		return store.ErrLeaseLost
	}
	if e.kept() {
		keep := e.keep()
		e.completed = deadline(now, lease)
		e.expires = deadline(e.completed, keep)
	} else {
		e.expires = deadline(now, lease)
	}
	sh.put(key, e)
	return nil
}

// owned returns the entry under key and whether token owns it; it removes
// the entry if it has expired. The caller holds sh.mu.
func (st *state) owned(sh *shard, key string, token uint64, now int64) (entry, bool) {
	e, found := sh.m[key]
	if !found {
		return entry{}, false
	}
	if e.expires <= now {
		st.remove(sh, key, e)
		return entry{}, false
	}
	return e, e.state == store.StateInFlight && e.token == token
}

// clone copies b; nil stays nil. Unlike bytes.Clone it allocates exactly
// len(b) bytes, without append's growth path.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// Abandon implements [store.Store.Abandon]. It ignores ctx.
func (s *Store) Abandon(_ context.Context, key, token string) error {
	tok, ok := parseToken(token)
	if !ok {
		return store.ErrLeaseLost
	}
	st := s.st
	sh, _ := st.shard(key)
	now := st.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, owned := st.owned(sh, key, tok, now)
	switch {
	case !owned:
		return store.ErrLeaseLost
	case !e.kept():
		st.remove(sh, key, e)
	case e.completed > now: // its lease runs: end it now
		keep := e.keep()
		e.completed = now
		e.expires = deadline(now, keep)
		sh.put(key, e)
	}
	return nil
}
