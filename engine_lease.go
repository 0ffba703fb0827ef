package idempotency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// Causes of a claimed handler's context being cancelled by the
// interceptor, read with context.Cause. Both match [store.ErrLeaseLost].
var (
	errCauseLeaseLost = fmt.Errorf("idempotency: the claim was taken over or removed: %w", store.ErrLeaseLost)
	errCauseLeaseOut  = fmt.Errorf("idempotency: the lease ran out before it could be renewed: %w", store.ErrLeaseLost)
)

// renewal keeps a claim's lease alive from the claim until its outcome is
// stored or its claim released. It renews every lease/3; a renewal that
// fails is retried at once with backoff until the lease would run out,
// which it tracks locally from the start of the last successful claim or
// renewal (a store extends the lease after that moment, never before). It
// uses a timer, not a goroutine, so a handler that finishes within a third
// of its lease costs no store call and no goroutine.
//
// When the lease is lost (the store says the token no longer owns the key)
// or runs out unrenewed, the handler's context is cancelled with a cause
// that matches [store.ErrLeaseLost], so the handler can stop before touching
// anything else: another execution may own the key by then.
type renewal struct {
	c *call

	// mu is held while renewing and while the outcome is being stored, so
	// a renewal never races the step that ends the claim.
	mu       sync.Mutex
	timer    *time.Timer
	leaseEnd time.Time
	failures int
	stopped  bool
	settling bool // a step that ends the claim has been tried
	lost     bool // the store said the token no longer owns the key
	expired  bool // the lease ran out unrenewed: it may still hold
}

// start schedules the first renewal of c's claim.
func (r *renewal) start(c *call) {
	r.c = c
	r.mu.Lock() // renew waits until timer is set
	r.leaseEnd = c.claimedAt.Add(c.cfg.lease)
	// A third of the lease after the claim was sent, which may be sooner
	// than a third after now when the claim was slow.
	r.timer = time.AfterFunc(time.Until(c.claimedAt.Add(c.cfg.lease/3)), r.renew)
	r.mu.Unlock()
}

func (r *renewal) renew() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.lost || r.expired {
		return
	}
	c, e := r.c, r.c.e
	lease := c.cfg.lease
	start := time.Now()
	left := r.leaseEnd.Sub(start)
	if left <= 0 {
		r.expire()
		return
	}
	detached := context.WithoutCancel(c.caller)
	ctx, cancel := context.WithTimeout(detached, min(e.cfg.storeTimeout, lease/3, left))
	err := e.store.Extend(ctx, c.key, c.claim.Token, lease)
	cancel()
	took := time.Since(start)
	switch {
	case err == nil:
		r.leaseEnd, r.failures = start.Add(lease), 0
		e.observe(detached, &c.subject, DecisionLeaseRenewed, took, nil)
		r.timer.Reset(lease / 3)
	case errors.Is(err, store.ErrLeaseLost) && (r.settling || c.txRecorded.Load()):
		// A step that ends the claim has been tried (its reply may have
		// been lost after it landed), or the handler's transaction
		// completed the key: nothing is left to renew, and the settling
		// step, retried, tells which it was.
		r.stopped = true
	case errors.Is(err, store.ErrLeaseLost) && c.kept():
		// A kept claim's Extend is refused once its lease has run out in
		// the store, while its token may still own the abandoned entry:
		// as when the lease runs out here, the handler is cancelled and
		// its outcome still offered, fenced by the token (decision 291).
		r.expire()
	case errors.Is(err, store.ErrLeaseLost):
		r.lost = true
		c.hctx.end(errCauseLeaseLost)
		e.observe(detached, &c.subject, DecisionLeaseLost, took, err)
	default:
		e.storeError(detached, &c.subject, r.failures+1, took, err)
		next := min(pollDelay(r.failures), time.Until(r.leaseEnd))
		r.failures++
		if next <= 0 {
			r.expire()
			return
		}
		r.timer.Reset(next)
	}
}

// expire records that the lease ran out unrenewed and cancels the handler.
// The claim may still hold in the store (a renewal that landed but whose
// reply was lost), so the outcome is still offered to it, fenced by the
// token.
func (r *renewal) expire() {
	r.expired = true
	r.c.hctx.end(errCauseLeaseOut)
}

// holding runs step, a store call that ends the claim, while no renewal
// runs; when step reports that the claim is settled, renewal stops before
// it can run again (an Extend after the outcome was stored would be refused
// and reported as a lost lease). It reports false without running step
// when the store has already said the claim is lost.
func (r *renewal) holding(step func() (settled bool)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost {
		return false
	}
	r.settling = true
	if step() {
		r.stopped = true
	}
	return true
}

// lapsed reports whether the lease ran out unrenewed, or a kept claim's
// renewal was refused, or its local end has passed though the renewal
// timer has not fired yet (a process paused past its lease). A renewal
// that never started (the caller gave up before the work) has not lapsed.
func (r *renewal) lapsed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expired || !r.leaseEnd.IsZero() && !time.Now().Before(r.leaseEnd)
}

// stop ends renewal once the claim is settled.
func (r *renewal) stop() {
	r.timer.Stop()
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
}
