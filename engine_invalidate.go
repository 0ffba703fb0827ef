package idempotency

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// Delays between the subscriptions of [engine.followPurges], while the
// store refuses them or ends them.
const (
	resubscribeMin = 100 * time.Millisecond
	resubscribeMax = 5 * time.Second
)

// purgeFeed is the subscription that keeps the replay cache in step with
// the store's purges ([store.Invalidator]), from [NewServer] until
// [Server.Close], or until the engine is garbage collected.
type purgeFeed struct {
	stop    context.CancelFunc
	done    chan struct{} // closed once followPurges has returned
	cleanup runtime.Cleanup
}

// followPurges starts the subscription of e's replay cache to the purges
// of its store, when e has a cache and its store can tell them. It does
// not wait for the store: the first subscription is made in the
// background, as are those after it.
func (e *engine) followPurges() {
	inv, ok := e.store.(store.Invalidator)
	if e.cache == nil || !ok {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &purgeFeed{stop: stop, done: make(chan struct{})}
	// The goroutine holds the cache and the store, not e: once no entry
	// point holds e, the cleanup ends it.
	go follow(ctx, inv, e.cache, f.done)
	f.cleanup = runtime.AddCleanup(e, func(stop context.CancelFunc) { stop() }, stop)
	e.purges = f
}

// follow subscribes to inv's purges and drops each purged key from rc,
// until ctx is done. Each subscription, the first included, empties rc
// once it is made: purges made before it (or while the last one was down)
// were not told. A subscription refused or ended is made again, after
// 100 ms growing to 5 s, for as long as it fails; a store that answers
// errors.ErrUnsupported cannot tell purges (a migratestore over two stores
// that cannot), and is not asked again.
func follow(ctx context.Context, inv store.Invalidator, rc *replayCache, done chan<- struct{}) {
	defer close(done)
	delay := resubscribeMin
	for {
		ch, err := inv.Invalidations(ctx)
		if errors.Is(err, errors.ErrUnsupported) {
			return
		}
		if err == nil {
			delay = resubscribeMin
			rc.invalidate(store.Invalidation{All: true})
			for m := range ch {
				if m.All || m.Key != "" { // one that names nothing changes nothing
					rc.invalidate(m)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, resubscribeMax)
	}
}

// close ends the subscription, if any, waits for it to return, and
// closes the replay cache it kept.
func (e *engine) close() {
	if e.purges == nil {
		return
	}
	e.purges.cleanup.Stop()
	e.purges.stop()
	<-e.purges.done
	e.cache.close()
}
