package idempotency

import (
	"container/list"
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/grpc-idempotency/idempotency/store"
)

// replayCacheEntryOverhead is what each entry of the replay cache
// ([WithReplayCache]) counts against maxBytes besides its store key,
// fingerprint and record: an estimate of its bookkeeping.
const replayCacheEntryOverhead = 192

type replayCacheConfig struct {
	maxEntries int
	maxBytes   int64
	ttl        time.Duration
}

// replayCache is the bounded LRU of completed outcomes, by store key. Its
// entries are never changed once added (a refill replaces one), so the
// fingerprint and record get returns are read without the lock.
//
// A purge told by the store ([engine.followPurges]) drops its key. A fill
// races with it: the record a call read from the store before the purge
// may reach put after the purge was told. So every invalidation moves gen
// on, a call keeps the gen of its miss (get), and put drops a fill whose
// gen is not the current one: its record may have been purged since it
// was read.
type replayCache struct {
	cfg   replayCacheConfig
	mu    sync.Mutex
	items map[string]*list.Element // of *cacheEntry
	lru   list.List                // most recently used at the front
	bytes int64
	gen   uint64 // moved on by every invalidation
	off   bool   // closed ([Server.Close]): nothing is kept or found
	// evictions counts the live entries put dropped to make room under
	// the bounds ([Server.ReplayCacheStats]).
	evictions uint64
}

type cacheEntry struct {
	key               string
	fingerprint, data []byte
	expires           time.Time
	size              int64
}

func newReplayCache(cfg *replayCacheConfig) *replayCache {
	if cfg == nil {
		return nil
	}
	return &replayCache{cfg: *cfg, items: make(map[string]*list.Element)}
}

// get returns the fingerprint and record cached under key, if any and not
// expired; on a miss, the generation a fill after it must be made in
// ([replayCache.put]).
func (rc *replayCache) get(key string) (fingerprint, data []byte, gen uint64, ok bool) {
	now := time.Now()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	el, ok := rc.items[key]
	if !ok {
		return nil, nil, rc.gen, false
	}
	ce := el.Value.(*cacheEntry)
	if !now.Before(ce.expires) {
		rc.remove(el)
		return nil, nil, rc.gen, false
	}
	rc.lru.MoveToFront(el)
	return ce.fingerprint, ce.data, 0, true
}

// put caches a copy of data, the completed record of key with fingerprint,
// until completed+retention or the cache's ttl from now, whichever comes
// first, unless an invalidation came since gen, the generation of the miss
// before the record was read. A record without a completion time is not
// cached, since when its retention ends cannot be told.
func (rc *replayCache) put(key string, fingerprint, data []byte, completed *timestamppb.Timestamp, retention time.Duration, gen uint64) {
	if completed == nil {
		return
	}
	now := time.Now()
	expires := completed.AsTime().Add(retention)
	if ttl := now.Add(rc.cfg.ttl); ttl.Before(expires) {
		expires = ttl
	}
	size := int64(len(key)+len(fingerprint)+len(data)) + replayCacheEntryOverhead
	if !expires.After(now) || size > rc.cfg.maxBytes {
		return
	}
	buf := make([]byte, len(fingerprint)+len(data))
	copy(buf, fingerprint)
	copy(buf[len(fingerprint):], data)
	ce := &cacheEntry{key: key, fingerprint: buf[:len(fingerprint):len(fingerprint)], data: buf[len(fingerprint):], expires: expires, size: size}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.off || gen != rc.gen {
		return
	}
	if el, ok := rc.items[key]; ok {
		rc.remove(el)
	}
	rc.items[key] = rc.lru.PushFront(ce)
	rc.bytes += size
	for len(rc.items) > rc.cfg.maxEntries || rc.bytes > rc.cfg.maxBytes {
		back := rc.lru.Back()
		if now.Before(back.Value.(*cacheEntry).expires) { // one past its expiry is no eviction
			rc.evictions++
		}
		rc.remove(back)
	}
}

// stats returns the cache's figures now.
func (rc *replayCache) stats() ReplayCacheStats {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return ReplayCacheStats{
		Entries:    len(rc.items),
		Bytes:      rc.bytes,
		MaxEntries: rc.cfg.maxEntries,
		MaxBytes:   rc.cfg.maxBytes,
		Evictions:  rc.evictions,
	}
}

// invalidate drops the entry of a purged key, or every entry.
func (rc *replayCache) invalidate(inv store.Invalidation) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.gen++
	if inv.All {
		rc.items, rc.lru, rc.bytes = make(map[string]*list.Element), list.List{}, 0
		return
	}
	if el, ok := rc.items[inv.Key]; ok {
		rc.remove(el)
	}
}

// close empties the cache for good: a cache no purge reaches any more is
// not used.
func (rc *replayCache) close() {
	rc.invalidate(store.Invalidation{All: true})
	rc.mu.Lock()
	rc.off = true
	rc.mu.Unlock()
}

func (rc *replayCache) remove(el *list.Element) {
	ce := rc.lru.Remove(el).(*cacheEntry)
	delete(rc.items, ce.key)
	rc.bytes -= ce.size
}

// replayCached answers c from the record cached under its key, cached with
// fingerprint fp, as [engine.run] answers from a completed store entry,
// without a store call.
func (e *engine) replayCached(ctx context.Context, c *call, fp, data []byte) (any, error) {
	if err := e.sameRequest(c, fp, data); err != nil {
		return nil, err
	}
	_, resp, err := e.replay(ctx, c, data)
	if !errors.Is(err, ErrRecordCorrupt) {
		ev := c.event(DecisionReplayed, 0, nil)
		ev.Cached = true
		e.cfg.observer.Observe(ctx, ev)
	}
	return resp, err
}

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
