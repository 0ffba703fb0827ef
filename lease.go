package idempotency

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// renewal extends a running handler's lease every lease/3 until stopped.
// It uses a timer, not a goroutine, so a handler that finishes within a
// third of its lease costs no store call and no goroutine.
type renewal struct {
	i   *interceptor
	ctx context.Context // the caller's; detached from its cancellation when renewing
	c   *call

	mu      sync.Mutex // held while renewing, so stop waits for a renewal under way
	timer   *time.Timer
	stopped bool
	lost    bool
}

func (r *renewal) start(i *interceptor, ctx context.Context, c *call) {
	r.i, r.ctx, r.c = i, ctx, c
	r.mu.Lock() // renew waits until timer is set
	r.timer = time.AfterFunc(c.cfg.lease/3, r.renew)
	r.mu.Unlock()
}

func (r *renewal) renew() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.lost {
		return
	}
	lease := r.c.cfg.lease
	octx := context.WithoutCancel(r.ctx)
	ctx, cancel := context.WithTimeout(octx, min(r.i.cfg.storeTimeout, lease/3))
	start := time.Now()
	err := r.i.store.Extend(ctx, r.c.key, r.c.claim.Token, lease)
	cancel()
	took := time.Since(start)
	switch {
	case err == nil:
		r.i.observe(octx, r.c.method, OutcomeLeaseRenewed, took, nil)
	case errors.Is(err, store.ErrLeaseLost):
		r.lost = true
		r.i.observe(octx, r.c.method, OutcomeLeaseLost, took, err)
		return
	default:
		// The store is failing; keep trying while the lease may still hold.
		r.i.observe(octx, r.c.method, OutcomeStoreError, took, err)
	}
	r.timer.Reset(lease / 3)
}

// stop ends renewal and reports whether the lease was already known lost.
func (r *renewal) stop() (lost bool) {
	r.timer.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	return r.lost
}
