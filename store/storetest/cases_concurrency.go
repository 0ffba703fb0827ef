package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
)

func concurrencyCases() []testCase {
	return []testCase{
		{"OneWinnerAmongThousand", oneWinnerAmongThousand},
		{"RacingOwnersNeverOverlap", racingOwnersNeverOverlap},
		{"ManyKeysCompletedOnce", manyKeysCompletedOnce},
	}
}

// oneWinnerAmongThousand claims one key from 1000 goroutines at once, each
// with a fingerprint of its own: exactly one wins, and every other one
// sees the winner's claim in flight with the winner's fingerprint.
func oneWinnerAmongThousand(t *testing.T, e *env) {
	const n = 1000
	key := e.key()
	type result struct {
		c   store.ClaimResult
		err error
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			c, err := e.s.Claim(e.ctx, key, []byte("claimer-"+strconv.Itoa(i)), longTTL, store.ClaimOptions{})
			results[i] = result{c, err}
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("claimer %d: %v", i, r.err)
		}
		if r.c.Won() {
			if winner >= 0 {
				t.Fatalf("two winners: claimers %d and %d (tokens %q, %q)", winner, i, results[winner].c.Token, r.c.Token)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no claimer won")
	}
	wantFP := []byte("claimer-" + strconv.Itoa(winner))
	for i, r := range results {
		if i == winner {
			continue
		}
		x := r.c.Existing
		if r.c.Token != "" || x.State != store.StateInFlight || !bytes.Equal(x.Fingerprint, wantFP) || x.Data != nil {
			t.Fatalf("claimer %d: token %q existing %s, want in_flight with the winner's fingerprint %q", i, r.c.Token, describe(x), wantFP)
		}
	}
	e.complete(key, results[winner].c.Token, []byte("winner"))
	e.wantCompleted(key, wantFP, []byte("winner"))
}

// racingOwnersNeverOverlap has workers claim, extend and release one key
// over and over while the others attack it with tokens they held before;
// then they race to complete it. At no moment may two workers own the key,
// no stale token may succeed, and exactly one Complete lands. A stale
// Release may find the key free between two owners in phase 1 (nil,
// nothing left to release); whether it returns nil or store.ErrLeaseLost,
// it must not free the key under its owner, which the owner checks show.
func racingOwnersNeverOverlap(t *testing.T, e *env) {
	const workers, rounds = 8, 60
	key := e.key()
	var owner atomic.Int64 // id+1 of the worker that owns the key, 0 if none
	var wins, completes atomic.Int64
	var completedBy atomic.Int64
	completedBy.Store(-1)
	lost := func(op string, err error) {
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("%s with a stale token: got %v, want store.ErrLeaseLost", op, err)
		}
	}
	// attack calls a random step with a random stale token; held says
	// whether the key surely holds an entry meanwhile.
	attack := func(rng *rand.Rand, stale []string, held bool) {
		if len(stale) == 0 {
			return
		}
		tok := stale[rng.IntN(len(stale))]
		switch rng.IntN(3) {
		case 0:
			lost("Complete", e.s.Complete(e.ctx, key, tok, []byte("stale"), longTTL))
		case 1:
			lost("Extend", e.s.Extend(e.ctx, key, tok, longTTL))
		default:
			if err := e.s.Release(e.ctx, key, tok); held || err != nil {
				lost("Release", err)
			}
		}
	}
	var wg, phase1 sync.WaitGroup
	phase1.Add(workers)
	for w := range workers {
		id := int64(w + 1)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(id), 1))
			fp := []byte("worker-" + strconv.FormatInt(id, 10))
			stale := claimExtendRelease(t, e, key, id, rounds, &owner, &wins, rng, attack)
			phase1.Done()
			phase1.Wait() // nobody completes while others still expect in_flight
			if t.Failed() {
				return
			}
			// Phase 2: race to complete.
			for {
				c, err := e.s.Claim(e.ctx, key, fp, longTTL, store.ClaimOptions{})
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if c.Won() {
					attack(rng, stale, true)
					if err := e.s.Complete(e.ctx, key, c.Token, fp, longTTL); err != nil {
						t.Errorf("worker %d: Complete with its own token: %v", id, err)
						return
					}
					completes.Add(1)
					completedBy.Store(id)
					attack(rng, stale, true)
					// Its own token may repeat Complete (a no-op), never
					// renew or delete the record.
					lost("Extend", e.s.Extend(e.ctx, key, c.Token, longTTL))
					lost("Release", e.s.Release(e.ctx, key, c.Token))
					return
				}
				if c.Existing.State == store.StateCompleted {
					attack(rng, stale, true)
					return
				}
				if t.Failed() {
					return // the winner gave up: stop spinning
				}
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if wins.Load() == 0 {
		t.Fatal("no worker ever won the key in phase 1")
	}
	if n := completes.Load(); n != 1 {
		t.Fatalf("%d Completes landed, want exactly 1", n)
	}
	fp := []byte("worker-" + strconv.FormatInt(completedBy.Load(), 10))
	e.wantCompleted(key, fp, fp)
}

// manyKeysCompletedOnce has workers claim and complete a set of shared
// keys in different orders: each key is completed exactly once, by its
// one winner, and keeps that winner's outcome. The workers go in pairs:
// the two of a pair take the keys in the same order and issue each Claim
// together (they meet on a channel first), so every key is claimed by two
// workers at once on every run, whatever the scheduler does; the pairs
// take different orders.
func manyKeysCompletedOnce(t *testing.T, e *env) {
	const pairs, keys = 4, 64
	names := make([]string, keys)
	for i := range names {
		names[i] = e.key()
	}
	var winners [keys]atomic.Int64
	var wg sync.WaitGroup
	for p := range pairs {
		meet := newMeeting()
		perm := rand.New(rand.NewPCG(uint64(p), 2)).Perm(keys)
		for side := range 2 {
			id := int64(2*p + side + 1)
			wg.Go(func() {
				defer meet.leave(side)
				fp := []byte(fmt.Sprintf("worker-%d", id))
				for _, k := range perm {
					meet.meet(side)
					if t.Failed() {
						return // a worker found a fault: stop them all
					}
					c, err := e.s.Claim(e.ctx, names[k], fp, longTTL, store.ClaimOptions{})
					if err != nil {
						t.Errorf("Claim: %v", err)
						return
					}
					if !c.Won() {
						continue
					}
					if !winners[k].CompareAndSwap(0, id) {
						t.Errorf("key %d won by workers %d and %d", k, winners[k].Load(), id)
						return
					}
					if err := e.s.Complete(e.ctx, names[k], c.Token, fp, longTTL); err != nil {
						t.Errorf("Complete: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for k := range keys {
		id := winners[k].Load()
		if id == 0 {
			t.Fatalf("key %d: nobody won it", k)
		}
		fp := []byte(fmt.Sprintf("worker-%d", id))
		e.wantCompleted(names[k], fp, fp)
	}
}

// meeting lets two goroutines, sides 0 and 1, meet before each of their
// steps, so that the two issue their steps together; once one side has
// left, the other goes on alone.
type meeting struct {
	arrived [2]chan struct{} // side i has come to its next step
	left    [2]chan struct{} // closed once side i has left
}

func newMeeting() *meeting {
	m := &meeting{}
	for i := range 2 {
		m.arrived[i], m.left[i] = make(chan struct{}, 1), make(chan struct{})
	}
	return m
}

// meet returns once the other side has come to the same step, or has left.
func (m *meeting) meet(side int) {
	select {
	case m.arrived[side] <- struct{}{}:
	case <-m.left[1-side]:
		return
	}
	select {
	case <-m.arrived[1-side]:
	case <-m.left[1-side]:
	}
}

// leave lets the other side go on alone.
func (m *meeting) leave(side int) { close(m.left[side]) }

// claimExtendRelease is phase 1 of racingOwnersNeverOverlap for worker
// id: it returns the tokens the worker held and released.
func claimExtendRelease(t *testing.T, e *env, key string, id int64, rounds int, owner, wins *atomic.Int64, rng *rand.Rand, attack func(*rand.Rand, []string, bool)) []string {
	fp := []byte("worker-" + strconv.FormatInt(id, 10))
	var stale []string
	for range rounds {
		c, err := e.s.Claim(e.ctx, key, fp, longTTL, store.ClaimOptions{})
		if err != nil {
			t.Errorf("Claim: %v", err)
			return stale
		}
		if !c.Won() {
			if c.Existing.State != store.StateInFlight {
				t.Errorf("worker %d: existing %s while nobody completes, want in_flight", id, describe(c.Existing))
				return stale
			}
			attack(rng, stale, false) // the owner may have released it since
			runtime.Gosched()
			continue
		}
		if !owner.CompareAndSwap(0, id) {
			t.Errorf("worker %d won the key while worker %d owns it", id, owner.Load())
			return stale
		}
		wins.Add(1)
		attack(rng, stale, true)
		if err := e.s.Extend(e.ctx, key, c.Token, longTTL); err != nil {
			t.Errorf("worker %d: Extend with its own token: %v", id, err)
		}
		owner.Store(0)
		if err := e.s.Release(e.ctx, key, c.Token); err != nil {
			t.Errorf("worker %d: Release with its own token: %v", id, err)
		}
		stale = append(stale, c.Token)
	}
	return stale
}
