package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// execute runs the work under the claim c holds, then settles the claim:
// it stores the outcome, or releases the claim after a retryable error or a
// panic. Those are the only ways a claim ends once its work has started.
func (e *engine) execute(ctx context.Context, c *call) (any, error) {
	if e.cfg.wait > 0 {
		defer e.flights.start(c.key)()
	}
	now := time.Now()
	c.createdAt.Seconds, c.createdAt.Nanos = now.Unix(), int32(now.Nanosecond())
	hctx := e.handlerContext(ctx, c)
	defer c.hctx.end(nil)
	c.renewal.start(c)
	// Renewal ends with this call, even when settling panics (an observer
	// or a marshaller): the lease then runs out, as after a crash.
	defer c.renewal.stop()

	finished := false
	defer func() {
		if !finished { // the handler panicked: release, and let the panic go on
			c.nesting.close()
			e.release(ctx, c, errHandlerPanicked)
		}
	}()
	c.nesting.open()
	resp, herr := e.work(hctx, c)
	// A call nested in the work may still run (the work started it in a
	// goroutine): the claim is settled once it has ended.
	c.nesting.close()
	finished = true
	if e.settle(ctx, c, resp, herr) && c.kept() {
		// The store holds another outcome, or will: an operator's
		// resolution, or a take-over's run. The caller retries the key for
		// it rather than take an answer no one else gets (decision 314).
		return nil, ErrKeyInUse
	}
	return resp, herr
}

// errHandlerPanicked is reported to the observer with the release that
// follows a panic.
var errHandlerPanicked = errors.New("idempotency: the handler panicked")

// handlerContext returns the context the work runs on: the caller's,
// carrying the claim and capturing what the transport records (a gRPC
// handler's header and trailer: [captureStream]); detached from the
// caller's cancellation and bounded by the handler timeout unless the
// method follows its caller; and cancelled with a cause when the lease is
// lost.
func (e *engine) handlerContext(ctx context.Context, c *call) context.Context {
	h := &c.hctx
	h.parent, h.claim, h.causes = c.t.capture(ctx), c, true
	if !c.cfg.followCaller {
		deadline := time.Now().Add(c.cfg.handlerTimeout)
		if d, ok := ctx.Deadline(); ok && d.After(deadline) {
			deadline = d
		}
		h.detached, h.hasDeadline, h.deadline, h.timeoutCause = true, true, deadline, ErrHandlerTimeout
	}
	return h
}

// settle ends the claim after the handler returned. It reports whether
// the store refused the outcome because the claim was lost
// ([store.ErrLeaseLost]).
func (e *engine) settle(ctx context.Context, c *call, resp any, herr error) (refused bool) {
	recorded, keep := c.txRecorded.Load(), e.keeps(herr)
	switch {
	case recorded && keep:
		// The handler's own transaction stored the outcome and committed.
		e.observe(ctx, &c.subject, DecisionExecuted, c.storeTime, nil)
	case recorded || !keep:
		// A retryable error. When the handler had recorded its outcome in
		// a transaction, that transaction did not commit, or did so
		// ambiguously: the fenced release frees the key in the first case
		// and leaves the committed record alone in the second.
		e.release(ctx, c, herr)
	default:
		data := e.outcome(ctx, c, resp, herr)
		refused = e.complete(ctx, c, *data)
		putBuffer(data)
	}
	return refused
}

// complete stores the outcome, and release deletes the claim. Each is
// retried with backoff through transient store errors for up to the store
// timeout, since giving up leaves the key in flight until its lease ends.
// Both are detached from the caller's cancellation: the handler ran, so its
// claim must be settled even if the caller has gone. complete reports
// whether the store refused the outcome because the claim was lost.
func (e *engine) complete(ctx context.Context, c *call, data []byte) (refused bool) {
	err := e.settleStep(ctx, c, func(sctx context.Context) error {
		return e.store.Complete(sctx, c.key, c.claim.Token, data, c.cfg.retention)
	})
	switch {
	case err == nil:
		if e.cache != nil {
			e.cache.put(c.key, c.fingerprint, data, &c.completed, c.cfg.retention, c.cacheGen)
		}
		if c.fromRecovery {
			e.observeAttempt(ctx, c, DecisionRecovered, nil)
			return
		}
		e.observe(ctx, &c.subject, DecisionExecuted, c.storeTime, nil)
	case errors.Is(err, store.ErrLeaseLost):
		e.observe(ctx, &c.subject, DecisionLeaseLost, c.storeTime, err)
		return true
	case !errors.Is(err, errLostEarlier):
		// The store failed until the store timeout: nothing renews the
		// claim any more, so it ends with its lease, and a retry then runs
		// the work again (decision 9). That is a lost claim.
		e.observe(ctx, &c.subject, DecisionLeaseLost, c.storeTime, fmt.Errorf("%w: %w", errNotStored, err))
	}
	return false
}

// errNotStored is the cause of the lease_lost event that follows a store
// that failed, through the store timeout, every attempt to store an
// outcome.
var errNotStored = fmt.Errorf("idempotency: the outcome could not be stored before the store timeout, so the claim ends with its lease: %w", store.ErrLeaseLost)

// release gives the claim up after a retryable error, a panic, or a
// caller gone before the work ran. A claim that took over an abandoned one
// is not released but abandoned again ([store.Store.Abandon]): its key
// never becomes free for a first attempt that would not know of the
// abandoned one, so the next call takes it over again, or is blocked
// (decisions 292, 293).
func (e *engine) release(ctx context.Context, c *call, cause error) {
	takenOver := c.claim.Attempt > 1
	// A kept claim whose lease ran out while its handler ran is abandoned
	// in the store: its handler may have acted before it was cancelled,
	// so it is left abandoned (decision 291), never released.
	abandon := takenOver || c.kept() && c.renewal.lapsed()
	err := e.settleStep(ctx, c, func(sctx context.Context) error {
		if abandon {
			return e.store.Abandon(sctx, c.key, c.claim.Token)
		}
		return e.store.Release(sctx, c.key, c.claim.Token)
	})
	switch {
	case err == nil && abandon && errors.Is(cause, ErrOutcomeUnknown):
		// The call fails with it: its blocked event says so.
	case err == nil:
		e.observe(ctx, &c.subject, DecisionReleased, c.storeTime, cause)
	case errors.Is(err, store.ErrLeaseLost) && c.txRecorded.Load():
		// The handler's transaction committed after all.
		e.observe(ctx, &c.subject, DecisionExecuted, c.storeTime, nil)
	case errors.Is(err, store.ErrLeaseLost):
		e.observe(ctx, &c.subject, DecisionLeaseLost, c.storeTime, err)
	}
}

var errLostEarlier = errors.New("idempotency: the lease was lost before the claim was settled")

// settleStep runs step until it succeeds, the store says the lease is lost,
// or the store timeout has passed. Each attempt runs while no renewal does,
// bounded by the time left and by a third of the lease (so renewal is never
// held off longer than its own cadence). It returns the last error, after
// reporting each transient one to the observer: one event per attempt,
// numbered, with that attempt's time. When renewal already
// learned that the lease is lost, it returns errLostEarlier without a store
// call: the loss was reported then.
func (e *engine) settleStep(ctx context.Context, c *call, step func(context.Context) error) error {
	giveUp := time.Now().Add(e.cfg.storeTimeout)
	for attempt := 0; ; attempt++ {
		var err error
		start := time.Now()
		held := c.renewal.holding(func() bool {
			deadline := start.Add(c.cfg.lease / 3)
			if giveUp.Before(deadline) {
				deadline = giveUp
			}
			actx := storeContext(&c.settleCtx, ctx, true, deadline)
			err = step(actx)
			actx.end(nil)
			return err == nil || errors.Is(err, store.ErrLeaseLost)
		})
		if !held {
			return errLostEarlier
		}
		took := time.Since(start)
		c.storeTime += took
		if err == nil || errors.Is(err, store.ErrLeaseLost) {
			return err
		}
		e.storeError(ctx, &c.subject, attempt+1, took, err)
		wait := pollDelay(attempt)
		if time.Now().Add(wait).After(giveUp) {
			return err
		}
		time.Sleep(wait)
	}
}
