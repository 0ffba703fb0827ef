package memorystore

import (
	"context"
	"sync"

	"github.com/grpc-idempotency/idempotency/store"
)

var _ store.Invalidator = (*Store)(nil)

// maxPending bounds the purges queued for one subscriber that is not
// reading; past it, they are dropped and replaced by one All.
const maxPending = 1024

// Invalidations implements [store.Invalidator.Invalidations]: the channel
// receives the keys [Store.Purge] deletes from this Store, in this
// process. A Purge never waits for a subscriber: each subscriber has a
// queue of its own, and once more than 1,024 purges wait in it unread,
// they are dropped for a single Invalidation with All set. The channel is
// closed once ctx is done. It never returns an error.
func (s *Store) Invalidations(ctx context.Context) (<-chan store.Invalidation, error) {
	sub := &subscriber{wake: make(chan struct{}, 1)}
	out := make(chan store.Invalidation)
	s.st.subs.add(sub)
	go func() {
		defer close(out)
		defer s.st.subs.remove(sub)
		sub.forward(ctx, out)
	}()
	return out, nil
}

// subscribers are the subscriptions of Invalidations.
type subscribers struct {
	mu  sync.Mutex
	set map[*subscriber]struct{}
}

func (ss *subscribers) add(sub *subscriber) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.set == nil {
		ss.set = map[*subscriber]struct{}{}
	}
	ss.set[sub] = struct{}{}
}

func (ss *subscribers) remove(sub *subscriber) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.set, sub)
}

// purged queues key for every subscriber.
func (ss *subscribers) purged(key string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for sub := range ss.set {
		sub.push(key)
	}
}

// subscriber is one subscription: the purges not delivered yet, and a
// goroutine that delivers them.
type subscriber struct {
	mu      sync.Mutex
	pending []store.Invalidation
	all     bool          // purges were dropped: deliver All first
	wake    chan struct{} // capacity 1: something was queued
}

// push queues key, or drops it for an All when the queue is full.
func (sub *subscriber) push(key string) {
	sub.mu.Lock()
	switch {
	case sub.all:
	case len(sub.pending) >= maxPending:
		sub.pending, sub.all = nil, true
	default:
		sub.pending = append(sub.pending, store.Invalidation{Key: key})
	}
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// take returns what is queued, and empties the queue.
func (sub *subscriber) take() []store.Invalidation {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.all {
		sub.all = false
		return []store.Invalidation{{All: true}}
	}
	batch := sub.pending
	sub.pending = nil
	return batch
}

// forward delivers the queue to out until ctx is done.
func (sub *subscriber) forward(ctx context.Context, out chan<- store.Invalidation) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.wake:
		}
		for batch := sub.take(); len(batch) > 0; batch = sub.take() {
			for _, inv := range batch {
				select {
				case out <- inv:
				case <-ctx.Done():
					return
				}
			}
		}
	}
}
