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
	i      *interceptor
	ctx    context.Context
	method string
	key    string
	token  string
	lease  time.Duration

	mu      sync.Mutex // held while renewing, so stop waits for a renewal under way
	timer   *time.Timer
	stopped bool
	lost    bool
}

func (i *interceptor) startRenewal(ctx context.Context, method, key, token string, lease time.Duration) *renewal {
	r := &renewal{i: i, ctx: context.WithoutCancel(ctx), method: method, key: key, token: token, lease: lease}
	r.mu.Lock() // renew waits until timer is set
	r.timer = time.AfterFunc(lease/3, r.renew)
	r.mu.Unlock()
	return r
}

func (r *renewal) renew() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.lost {
		return
	}
	ctx, cancel := context.WithTimeout(r.ctx, min(r.i.cfg.storeTimeout, r.lease/3))
	start := time.Now()
	err := r.i.store.Extend(ctx, r.key, r.token, r.lease)
	cancel()
	took := time.Since(start)
	switch {
	case err == nil:
		r.i.observe(r.ctx, r.method, OutcomeLeaseRenewed, took, nil)
	case errors.Is(err, store.ErrLeaseLost):
		r.lost = true
		r.i.observe(r.ctx, r.method, OutcomeLeaseLost, took, err)
		return
	default:
		// The store is failing; keep trying while the lease may still hold.
		r.i.observe(r.ctx, r.method, OutcomeStoreError, took, err)
	}
	r.timer.Reset(r.lease / 3)
}

// stop ends renewal and reports whether the lease was already known lost.
func (r *renewal) stop() (lost bool) {
	r.timer.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	return r.lost
}
