package storetest

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// kept is the ClaimOptions of a claim whose entry outlives its lease.
var kept = store.ClaimOptions{Keep: longTTL}

// takeOver is kept with TakeOver: the claim of a retry under a policy that
// re-runs or recovers an abandoned key.
var takeOver = store.ClaimOptions{Keep: longTTL, TakeOver: true}

// claimKept claims key with kept and fails the case unless it is won as
// attempt 1.
func (e *env) claimKept(key string, fp []byte, lease time.Duration) string {
	e.t.Helper()
	c, err := e.s.Claim(e.ctx, key, fp, lease, kept)
	if err != nil {
		e.t.Fatalf("Claim(%q, Keep) of a free key: %v", key, err)
	}
	if !c.Won() || c.Attempt != 1 || !c.Previous.IsZero() {
		e.t.Fatalf("Claim(%q, Keep) of a free key: won=%v attempt=%d previous=%v existing %s, want won as attempt 1 with no previous", key, c.Won(), c.Attempt, c.Previous, describe(c.Existing))
	}
	return c.Token
}

// abandoned makes key an abandoned entry claimed with fp and returns the
// token that abandoned it and when it was claimed.
func (e *env) abandoned(key string, fp []byte) (string, span) {
	e.t.Helper()
	var tok string
	claimed := around(func() { tok = e.claimKept(key, fp, longTTL) })
	e.ok("Abandon by the owner", e.s.Abandon(e.ctx, key, tok))
	return tok, claimed
}

// wantAbandoned fails the case unless a Claim with opts (not a take-over
// of fp's entry) finds key abandoned with fp.
func (e *env) wantAbandoned(key string, fp []byte, opts store.ClaimOptions) {
	e.t.Helper()
	c, err := e.s.Claim(e.ctx, key, probe, longTTL, opts)
	if err != nil {
		e.t.Fatalf("Claim(%q) of an abandoned key: %v", key, err)
	}
	if c.Won() {
		e.t.Fatalf("Claim(%q) of an abandoned key with another fingerprint won (attempt %d)", key, c.Attempt)
	}
	if got := c.Existing; got.State != store.StateAbandoned || !bytes.Equal(got.Fingerprint, fp) || got.Data != nil {
		e.t.Fatalf("entry of %q = %s, want abandoned with fingerprint %x and nil data", key, describe(got), fp)
	}
}

// takeOverWin takes over key's abandoned entry and fails the case unless
// the claim is won as the given attempt, with a Previous in prev.
func (e *env) takeOverWin(key string, fp []byte, attempt int, prev span) string {
	e.t.Helper()
	c, err := e.s.Claim(e.ctx, key, fp, longTTL, takeOver)
	if err != nil {
		e.t.Fatalf("take-over Claim(%q): %v", key, err)
	}
	if !c.Won() || c.Attempt != attempt {
		e.t.Fatalf("take-over Claim(%q): won=%v attempt=%d existing %s, want won as attempt %d", key, c.Won(), c.Attempt, describe(c.Existing), attempt)
	}
	prev.want(e, "Previous of the take-over", c.Previous, 0)
	return c.Token
}

func abandonedCases() []testCase {
	return []testCase{
		{"LapsedLeaseIsAbandoned", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			start := time.Now()
			tok := e.claimKept(key, fp, e.lease)
			if c, err := e.s.Claim(e.ctx, key, probe, longTTL, takeOver); err != nil || c.Won() || c.Existing.State != store.StateInFlight {
				if time.Since(start) >= e.lease {
					tooSlow(t, start, e.lease, "a claim and a second claim")
				}
				t.Fatalf("take-over Claim of a live claim: %+v, %v, want the in-flight entry", c, err)
			}
			sleepPast(e.lease)
			e.wantAbandoned(key, fp, kept)
			e.wantLeaseLost("Extend of an abandoned entry", e.s.Extend(e.ctx, key, tok, longTTL))
			e.wantAbandoned(key, fp, store.ClaimOptions{})
		}},
		{"KeepRunsOut", func(t *testing.T, e *env) {
			key := e.key()
			c, err := e.s.Claim(e.ctx, key, fingerprint(), e.lease, store.ClaimOptions{Keep: e.retention})
			if err != nil || !c.Won() {
				t.Fatalf("Claim with Keep: %+v, %v", c, err)
			}
			sleepPast(e.lease + e.retention)
			e.refusedFree("the token of a claim kept past its keep", key, c.Token)
			e.wantFree(key)
		}},
		{"ExtendKeepsTheKeep", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			start := time.Now()
			tok := e.claimKept(key, fp, e.lease)
			e.ok("Extend within the lease", e.s.Extend(e.ctx, key, tok, 2*e.lease))
			if time.Since(start) >= e.lease {
				tooSlow(t, start, e.lease, "a claim and its extension")
			}
			sleepPast(2 * e.lease)
			e.wantAbandoned(key, fp, store.ClaimOptions{})
		}},
		{"AbandonNow", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok, _ := e.abandoned(key, fp)
			e.wantAbandoned(key, fp, kept)
			e.ok("Abandon of an abandoned entry by its owner", e.s.Abandon(e.ctx, key, tok))
			e.wantLeaseLost("Abandon with a foreign token", e.s.Abandon(e.ctx, key, tok+"0"))
			e.wantLeaseLost("Extend of an abandoned entry", e.s.Extend(e.ctx, key, tok, longTTL))
			e.wantAbandoned(key, fp, kept)
		}},
		{"AbandonWithoutKeepFrees", func(t *testing.T, e *env) {
			key := e.key()
			tok := e.claimWin(key, fingerprint(), longTTL)
			e.ok("Abandon of an entry claimed without Keep", e.s.Abandon(e.ctx, key, tok))
			e.wantFree(key)
		}},
		{"AbandonRefusedOnceDone", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok := e.claimKept(key, fp, longTTL)
			e.complete(key, tok, []byte("done"))
			e.wantLeaseLost("Abandon of a completed entry", e.s.Abandon(e.ctx, key, tok))
			e.wantCompleted(key, fp, []byte("done"))
			free := e.key()
			e.wantLeaseLost("Abandon of a free key", e.s.Abandon(e.ctx, free, tok))
			e.wantFree(free)
		}},
		{"TakeOverFencesTheAbandonedOwner", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			old, claimed := e.abandoned(key, fp)
			tok := e.takeOverWin(key, fp, 2, claimed)
			if tok == old {
				t.Fatalf("take-over got the abandoned token %q again", tok)
			}
			e.refusedAll("the abandoned owner's token", key, old)
			e.wantLeaseLost("Abandon with the abandoned owner's token", e.s.Abandon(e.ctx, key, old))
			e.wantInFlight(key, fp)
			e.complete(key, tok, []byte("recovered"))
			e.wantCompleted(key, fp, []byte("recovered"))
		}},
		{"AttemptsCount", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			_, claimed := e.abandoned(key, fp)
			var tok string
			second := around(func() { tok = e.takeOverWin(key, fp, 2, claimed) })
			e.ok("Abandon of the second attempt", e.s.Abandon(e.ctx, key, tok))
			tok = e.takeOverWin(key, fp, 3, second)
			e.ok("Release of the third attempt", e.s.Release(e.ctx, key, tok))
			e.claimKept(key, fp, longTTL) // a released key starts again at 1
		}},
		{"TakeOverKeepsTheKeep", func(t *testing.T, e *env) {
			// The entry keeps the Keep of the claim that made it: a
			// take-over asking for a shorter one does not shorten it.
			key, fp := e.key(), fingerprint()
			_, claimed := e.abandoned(key, fp)
			c, err := e.s.Claim(e.ctx, key, fp, longTTL, store.ClaimOptions{Keep: e.retention, TakeOver: true})
			if err != nil || !c.Won() || c.Attempt != 2 {
				t.Fatalf("take-over with a shorter Keep: %+v, %v, want won as attempt 2", c, err)
			}
			claimed.want(e, "Previous of the take-over", c.Previous, 0)
			e.ok("Abandon of the take-over", e.s.Abandon(e.ctx, key, c.Token))
			sleepPast(e.retention)
			e.wantAbandoned(key, fp, kept)
		}},
		{"TakeOverNeedsTheSameFingerprint", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			e.abandoned(key, fp)
			e.wantAbandoned(key, fp, takeOver) // wantAbandoned claims with probe
		}},
		{"TakeOverLeavesOtherStates", func(t *testing.T, e *env) {
			live, fp := e.key(), fingerprint()
			e.claimKept(live, fp, longTTL)
			if c, err := e.s.Claim(e.ctx, live, fp, longTTL, takeOver); err != nil || c.Won() || c.Existing.State != store.StateInFlight {
				t.Fatalf("take-over Claim of a live claim: %+v, %v, want the in-flight entry", c, err)
			}
			done := e.key()
			tok := e.claimKept(done, fp, longTTL)
			e.complete(done, tok, []byte("done"))
			if c, err := e.s.Claim(e.ctx, done, fp, longTTL, takeOver); err != nil || c.Won() || c.Existing.State != store.StateCompleted {
				t.Fatalf("take-over Claim of a completed entry: %+v, %v, want the completed entry", c, err)
			}
		}},
		{"AbandonedOwnerStillCompletes", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok, _ := e.abandoned(key, fp)
			e.complete(key, tok, []byte("late"))
			e.wantCompleted(key, fp, []byte("late"))
		}},
		{"AbandonedOwnerStillReleases", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			tok, _ := e.abandoned(key, fp)
			e.ok("Release of an abandoned entry by its owner", e.s.Release(e.ctx, key, tok))
			e.wantFree(key)
		}},
		{"OneTakeOverAmongMany", func(t *testing.T, e *env) {
			key, fp := e.key(), fingerprint()
			e.abandoned(key, fp)
			const n = 64
			var wins atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				wg.Go(func() {
					c, err := e.s.Claim(e.ctx, key, fp, longTTL, takeOver)
					switch {
					case err != nil:
						errs <- err
					case c.Won():
						wins.Add(1)
					case c.Existing.State != store.StateInFlight:
						errs <- errors.New("a losing take-over saw " + c.Existing.State.String() + ", want in_flight")
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if w := wins.Load(); w != 1 {
				t.Fatalf("%d of %d take-overs of one abandoned entry won, want 1", w, n)
			}
		}},
		{"NegativeKeepRefused", func(t *testing.T, e *env) {
			key := e.key()
			if c, err := e.s.Claim(e.ctx, key, fingerprint(), longTTL, store.ClaimOptions{Keep: -time.Second}); err == nil {
				t.Fatalf("Claim with a negative Keep: %+v, want an argument error", c)
			}
			e.wantFree(key)
		}},
		{"InspectAbandoned", inspectAbandoned},
	}
}

// inspectAbandoned: an operator sees an abandoned entry as such, counts
// it, lists it by state, and resolves it either way: Complete under its
// Info.Token, or Purge with InFlight.
func inspectAbandoned(t *testing.T, e *env) {
	in := e.inspector()
	if in == nil {
		return
	}
	key, fp := e.key(), fingerprint()
	tok, claimed := e.abandoned(key, fp)
	info := e.lookup(key)
	if info.State != store.StateAbandoned || info.Attempt != 1 || !bytes.Equal(info.Fingerprint, fp) {
		t.Fatalf("Lookup of an abandoned entry: state %s attempt %d fingerprint %x, want abandoned, attempt 1, %x", info.State, info.Attempt, info.Fingerprint, fp)
	}
	claimed.want(e, "Claimed of the abandoned entry", info.Claimed, 0)
	got := e.walk(key, store.ListOptions{State: store.StateAbandoned})
	if len(got) == 0 {
		t.Fatalf("List of abandoned entries under %q: none, want the abandoned entry", key)
	}
	for _, i := range got { // a store may list an entry twice (see store.Inspector.List)
		if i.Key != key || i.State != store.StateAbandoned {
			t.Fatalf("List of abandoned entries under %q: %+v, want the abandoned entry only", key, got)
		}
	}
	if got := e.walk(key, store.ListOptions{State: store.StateInFlight}); len(got) != 0 {
		t.Fatalf("List of in-flight entries under %q: %+v, want none: the entry is abandoned", key, got)
	}
	st, err := in.Stats(e.ctx)
	e.ok("Stats", err)
	if st.Abandoned.Entries < 1 && !st.Estimated {
		t.Fatalf("Stats: %+v, want at least one abandoned entry", st)
	}
	// Resolve with an outcome, as an operator does; the abandoned owner
	// has lost the key then.
	e.ok("Complete under the Info.Token of an abandoned entry", e.s.Complete(e.ctx, key, info.Token, []byte("resolved"), longTTL))
	e.wantCompleted(key, fp, []byte("resolved"))
	e.wantLeaseLost("a foreign Complete after an operator's", e.s.Complete(e.ctx, key, tok+"0", []byte("late"), longTTL))

	// Resolve by letting the next retry run.
	other := e.key()
	e.abandoned(other, fp)
	if _, err := in.Purge(e.ctx, other, store.PurgeOptions{}); !errors.Is(err, store.ErrInFlight) {
		t.Fatalf("Purge of an abandoned entry without InFlight: %v, want store.ErrInFlight", err)
	}
	if _, err := in.Purge(e.ctx, other, store.PurgeOptions{InFlight: true, Token: e.lookup(other).Token}); err != nil {
		t.Fatalf("Purge with InFlight of an abandoned entry under its token: %v", err)
	}
	e.wantFree(other)
}
