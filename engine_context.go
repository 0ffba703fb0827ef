package idempotency

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// lazyContext is a context that behaves as the standard library's chain
// of WithoutCancel (when detached), WithDeadlineCause (when it has a
// deadline) and WithCancelCause (when it is cancelled with causes) over
// parent, and builds that chain only when something waits on it: its
// first Done call, or a Value call once it has ended (how [context.Cause]
// reads a cause). Until then it arms no timer and allocates nothing: Err
// compares the clock with the deadline and asks the parent, and an end is
// recorded in place. A store call or a handler that never waits on its
// context (the memory store's calls, a handler that only computes) pays
// none of the chain's timers, channels and child registrations; one that
// does pays for the chain as before.
//
// Its answers are those the chain would give: Err is DeadlineExceeded once
// the deadline has passed (cause: timeoutCause), the parent's error once
// the parent has ended (unless detached; cause: the parent's), Canceled
// once end was called (cause: end's, or Canceled); the first of
// these sticks. Once built, the chain answers everything, and it is built
// to match the end already recorded.
type lazyContext struct {
	parent       context.Context
	deadline     time.Time
	hasDeadline  bool
	detached     bool  // the parent's cancellation does not apply
	causes       bool  // cancel takes a cause: the chain ends in WithCancelCause
	timeoutCause error // the cause at the deadline; nil: DeadlineExceeded
	claim        *call // answers Value(claimKey{}), when set

	// settled is set once the context has ended or its chain is built,
	// so Value on a live context only asks the parent.
	settled atomic.Bool
	mu      sync.Mutex
	ended   endKind
	err     error // the recorded end, before the chain is built
	cause   error // cancel's cause, with endCancelled
	chain   context.Context
	cancel  context.CancelCauseFunc // of the chain's WithCancelCause, when causes
	stop    context.CancelFunc      // of the chain's WithDeadlineCause, when hasDeadline
}

// endKind says how a lazyContext ended before its chain was built.
type endKind uint8

const (
	endNone endKind = iota
	endParent
	endDeadline
	endCancelled
)

// Deadline implements [context.Context]: the earlier of its own and, unless
// detached, the parent's.
func (l *lazyContext) Deadline() (time.Time, bool) {
	var d time.Time
	ok := false
	if !l.detached {
		d, ok = l.parent.Deadline()
	}
	if l.hasDeadline && (!ok || l.deadline.Before(d)) {
		return l.deadline, true
	}
	return d, ok
}

// Done implements [context.Context]; it builds the chain.
func (l *lazyContext) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.build()
	return l.chain.Done()
}

// Err implements [context.Context].
func (l *lazyContext) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.chain != nil {
		return l.chain.Err()
	}
	l.check()
	return l.err
}

// Value implements [context.Context]. Once the context has ended, it
// builds the chain, whose cancelCtx holds the cause [context.Cause] reads.
func (l *lazyContext) Value(key any) any {
	if l.claim != nil && key == (claimKey{}) {
		return l.claim
	}
	if !l.settled.Load() {
		// Not ended, or ended unseen: [context.Cause] calls Err first,
		// which records the end.
		return l.parent.Value(key)
	}
	l.mu.Lock()
	l.build()
	chain := l.chain
	l.mu.Unlock()
	return chain.Value(key)
}

// check records an end that has come: the parent's or the deadline's.
// The caller holds l.mu.
func (l *lazyContext) check() {
	if l.ended != endNone {
		return
	}
	if !l.detached {
		if err := l.parent.Err(); err != nil {
			l.ended, l.err = endParent, err
			l.settled.Store(true)
			return
		}
	}
	if l.hasDeadline && !time.Now().Before(l.deadline) {
		l.ended, l.err = endDeadline, context.DeadlineExceeded
		l.settled.Store(true)
	}
}

// build makes the chain, ended as recorded. The caller holds l.mu.
func (l *lazyContext) build() {
	if l.chain != nil {
		return
	}
	l.check()
	l.settled.Store(true)
	base := l.parent
	if l.detached || l.ended == endCancelled || l.ended == endDeadline {
		// A parent that ended since would end the chain with its own
		// error instead of the one recorded.
		base = context.WithoutCancel(base)
	}
	if l.hasDeadline && l.ended != endCancelled {
		// Past the deadline, it ends at once with DeadlineExceeded.
		base, l.stop = context.WithDeadlineCause(base, l.deadline, l.timeoutCause)
	}
	l.chain = base
	if l.causes || l.ended == endCancelled {
		l.chain, l.cancel = context.WithCancelCause(base)
	}
	if l.ended == endCancelled {
		l.cancel(l.cause)
	}
}

// end cancels the context with cause (nil: Canceled) and releases the
// chain's timer, if built. An earlier end stays.
func (l *lazyContext) end(cause error) {
	l.mu.Lock()
	if l.chain == nil {
		if l.check(); l.ended == endNone {
			l.ended, l.err, l.cause = endCancelled, context.Canceled, cause
			l.settled.Store(true)
		}
		l.mu.Unlock()
		return
	}
	cancel, stop := l.cancel, l.stop
	l.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
	if stop != nil {
		stop()
	}
}

// storeContext returns the context of one store call, bounded by deadline
// and detached from parent's cancellation when detached: spare, a context
// of the call's own, when no store call has used it, else a new one. A
// context is never reused, as a store may look at it after the call.
func storeContext(spare *lazyContext, parent context.Context, detached bool, deadline time.Time) *lazyContext {
	l := spare
	if l.parent != nil {
		l = &lazyContext{}
	}
	l.parent, l.detached, l.deadline, l.hasDeadline = parent, detached, deadline, true
	return l
}
