// Package faultstore wraps a real store.Store to inject faults and record
// calls in tests: a store that is down, renewals that never land, records
// that come back corrupt. It is a decorator, not a fake: every call that is
// not failed goes to the real store underneath.
package faultstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// ErrDown is what a store that is down returns.
var ErrDown = errors.New("faultstore: connection refused to 10.0.0.1:6379")

// Store decorates a real store.
type Store struct {
	store.Store

	// Down makes every call fail with ErrDown.
	Down atomic.Bool
	// SkipExtend makes Extend report success without renewing: the
	// process looks alive while its lease runs out.
	SkipExtend atomic.Bool
	// CorruptData makes Complete store Garbage instead of the record.
	CorruptData atomic.Bool
	// Full makes every Claim fail with store.ErrFull without reaching the
	// store, as a store at its bound refuses new keys; the other calls go
	// through.
	Full atomic.Bool

	failCompletes atomic.Int64
	loseCompletes atomic.Int64
	stalls        map[string]*atomic.Int64 // op -> calls left to stall

	mu     sync.Mutex
	calls  []Call
	claims map[string]string // key -> token of each claim granted through s
}

// Garbage is what CorruptData stores.
var Garbage = []byte("\x0a\xff\xffnot a record")

// Call is one recorded call.
type Call struct {
	Op       string // "claim", "complete", "release", "extend", "abandon"
	Key      string
	Duration time.Duration // lease or retention passed in
	// Opts are the options of a claim; zero for the other calls.
	Opts store.ClaimOptions
	Err  error
}

// New wraps s.
func New(s store.Store) *Store {
	return &Store{Store: s, stalls: map[string]*atomic.Int64{
		"claim": new(atomic.Int64), "complete": new(atomic.Int64),
		"release": new(atomic.Int64), "extend": new(atomic.Int64),
		"abandon": new(atomic.Int64),
	}}
}

// Stall makes the next n calls of op ("claim", "complete", "release",
// "extend", "abandon") hang until their context is done, as a call on a stalled link
// does, and then fail with the context's error without reaching the store.
func (s *Store) Stall(op string, n int64) { s.stalls[op].Store(n) }

// stalled hangs a call of op that is to stall and returns its error; it
// returns nil for a call that goes through.
func (s *Store) stalled(ctx context.Context, op, key string, d time.Duration) error {
	if s.stalls[op].Add(-1) < 0 {
		return nil
	}
	<-ctx.Done()
	s.record(op, key, d, ctx.Err())
	return ctx.Err()
}

// Calls returns the calls made so far.
func (s *Store) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Count returns how many calls of op were made.
func (s *Store) Count(op string) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Op == op {
			n++
		}
	}
	return n
}

func (s *Store) record(op, key string, d time.Duration, err error) {
	s.recordCall(Call{Op: op, Key: key, Duration: d, Err: err})
}

func (s *Store) recordCall(c Call) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, key string, fp []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	if s.Down.Load() {
		s.recordCall(Call{Op: "claim", Key: key, Duration: lease, Opts: opts, Err: ErrDown})
		return store.ClaimResult{}, ErrDown
	}
	if s.Full.Load() {
		s.recordCall(Call{Op: "claim", Key: key, Duration: lease, Opts: opts, Err: store.ErrFull})
		return store.ClaimResult{}, store.ErrFull
	}
	if err := s.stalled(ctx, "claim", key, lease); err != nil {
		return store.ClaimResult{}, err
	}
	c, err := s.Store.Claim(ctx, key, fp, lease, opts)
	if err == nil && c.Won() {
		s.mu.Lock()
		if s.claims == nil {
			s.claims = make(map[string]string)
		}
		s.claims[key] = c.Token
		s.mu.Unlock()
	}
	s.recordCall(Call{Op: "claim", Key: key, Duration: lease, Opts: opts, Err: err})
	return c, err
}

// Evict removes from the real store every claim granted through s that
// still holds its key, as a store that loses or evicts an entry does: the
// owner's next renewal or completion is refused with store.ErrLeaseLost,
// and the key is free for a new claim. A completed key is left alone (a
// release never removes a completed record). It returns how many claims
// it removed.
func (s *Store) Evict(ctx context.Context) (int, error) {
	s.mu.Lock()
	claims := s.claims
	s.claims = nil
	s.mu.Unlock()
	n := 0
	for key, token := range claims {
		switch err := s.Store.Release(ctx, key, token); {
		case err == nil:
			n++
		case !errors.Is(err, store.ErrLeaseLost):
			return n, err
		}
	}
	return n, nil
}

// Complete implements store.Store.
func (s *Store) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	if s.Down.Load() {
		s.record("complete", key, retention, ErrDown)
		return ErrDown
	}
	if s.failCompletes.Add(-1) >= 0 {
		s.record("complete", key, retention, ErrDown)
		return ErrDown
	}
	if err := s.stalled(ctx, "complete", key, retention); err != nil {
		return err
	}
	if s.CorruptData.Load() {
		data = Garbage
	}
	err := s.Store.Complete(ctx, key, token, data, retention)
	if err == nil && s.loseCompletes.Add(-1) >= 0 {
		err = ErrDown // it landed, but its reply is lost
	}
	s.record("complete", key, retention, err)
	return err
}

// LoseCompleteReplies makes the next n Complete calls that succeed report
// ErrDown, as a call whose reply was lost after it landed does.
func (s *Store) LoseCompleteReplies(n int64) { s.loseCompletes.Store(n) }

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, key, token string) error {
	if s.Down.Load() {
		s.record("release", key, 0, ErrDown)
		return ErrDown
	}
	if err := s.stalled(ctx, "release", key, 0); err != nil {
		return err
	}
	err := s.Store.Release(ctx, key, token)
	s.record("release", key, 0, err)
	return err
}

// Extend implements store.Store.
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	if s.Down.Load() {
		s.record("extend", key, lease, ErrDown)
		return ErrDown
	}
	if err := s.stalled(ctx, "extend", key, lease); err != nil {
		return err
	}
	if s.SkipExtend.Load() {
		s.record("extend", key, lease, nil)
		return nil
	}
	err := s.Store.Extend(ctx, key, token, lease)
	s.record("extend", key, lease, err)
	return err
}

// Abandon implements store.Store.
func (s *Store) Abandon(ctx context.Context, key, token string) error {
	if s.Down.Load() {
		s.record("abandon", key, 0, ErrDown)
		return ErrDown
	}
	if err := s.stalled(ctx, "abandon", key, 0); err != nil {
		return err
	}
	err := s.Store.Abandon(ctx, key, token)
	s.record("abandon", key, 0, err)
	return err
}

// FailCompletes makes the next n Complete calls fail with ErrDown.
func (s *Store) FailCompletes(n int64) { s.failCompletes.Store(n) }
