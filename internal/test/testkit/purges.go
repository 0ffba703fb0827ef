package testkit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/test/wait"
	"github.com/grpc-idempotency/idempotency/store"
)

// PurgeWatch wraps a store whose purges a [store.Invalidator] tells, and tells a test
// when its subscriber (the replay cache of an idempotency.Server) has
// subscribed and when it has handled each invalidation, so that the test
// waits on those rather than sleeping. Its Invalidations delivers the real
// store's invalidations, each followed by an Invalidation of the empty
// key, which names nothing and which a cache ignores (it does not even
// count it as a purge that a fill racing it must lose): a subscriber reads
// its channel in order, one invalidation at a time, so once it has taken
// that marker it has handled what came before. The first subscription starts with a marker too, taken
// once the subscriber has done what it does on subscribing.
type PurgeWatch struct {
	store.Store
	inv store.Invalidator

	mu          sync.Mutex
	subscribed  int
	ended       int // subscriptions whose subscriber stopped, or whose store ended them
	handled     []store.Invalidation
	failures    int   // subscriptions left to refuse
	failWith    error // their error
	subscribing int   // Invalidations calls, refused ones included
	signal      wait.Signal
}

// NewPurgeWatch wraps s, whose purges inv tells: s itself, or the store
// s wraps.
func NewPurgeWatch(s store.Store, inv store.Invalidator) *PurgeWatch {
	return &PurgeWatch{Store: s, inv: inv}
}

// Refuse makes the next n subscriptions fail with err, as a store that
// cannot be reached refuses them.
func (w *PurgeWatch) Refuse(n int, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failures, w.failWith = n, err
}

// Invalidations implements store.Invalidator.
func (w *PurgeWatch) Invalidations(ctx context.Context) (<-chan store.Invalidation, error) {
	w.mu.Lock()
	w.subscribing++
	refuse := w.failures > 0
	if refuse {
		w.failures--
	}
	err := w.failWith
	w.mu.Unlock()
	w.signal.Notify()
	if refuse {
		return nil, err
	}
	ch, err := w.inv.Invalidations(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan store.Invalidation)
	send := func(inv store.Invalidation) bool {
		select {
		case out <- inv:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer w.update(func() { w.ended++ })
		defer close(out)
		if !send(store.Invalidation{}) {
			return
		}
		w.update(func() { w.subscribed++ })
		for inv := range ch {
			if !send(inv) || !send(store.Invalidation{}) {
				return
			}
			w.update(func() { w.handled = append(w.handled, inv) })
		}
	}()
	return out, nil
}

func (w *PurgeWatch) update(f func()) {
	w.mu.Lock()
	f()
	w.mu.Unlock()
	w.signal.Notify()
}

// Attempts returns how many subscriptions were asked for, refused ones
// included.
func (w *PurgeWatch) Attempts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.subscribing
}

// Ended returns how many subscriptions have ended: their context is
// done, or the store ended them.
func (w *PurgeWatch) Ended() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

// WaitSubscribed waits until n subscriptions in all have been made and
// their subscribers have done what they do on subscribing.
func (w *PurgeWatch) WaitSubscribed(tb testing.TB, n int) {
	tb.Helper()
	w.signal.Until(tb, fmt.Sprintf("%d subscriptions", n), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.subscribed >= n
	})
}

// WaitHandled waits until the subscribers have handled an invalidation
// of key ("" for one with All set).
func (w *PurgeWatch) WaitHandled(tb testing.TB, key string) {
	tb.Helper()
	w.signal.Until(tb, fmt.Sprintf("the invalidation of %q handled", key), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.ContainsFunc(w.handled, func(inv store.Invalidation) bool {
			return inv.Key == key && inv.All == (key == "")
		})
	})
}
