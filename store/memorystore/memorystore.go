package memorystore

import (
	"errors"
	"hash/maphash"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

var _ store.Store = (*Store)(nil)

// shardBits is log2 of the number of shards.
const (
	shardBits = 6
	numShards = 1 << shardBits
)

var (
	errLease     = errors.New("memorystore: lease must be positive")
	errRetention = errors.New("memorystore: retention must be positive")
	errKeep      = errors.New("memorystore: keep must not be negative")
)

// Store is an in-memory [store.Store]. It is safe for concurrent use. The
// zero value is not usable: make one with [New], and call [Store.Close]
// when done with it.
type Store struct {
	st *state
	// cleanup stops the sweeper if the Store is dropped without Close.
	cleanup runtime.Cleanup
}

// state is everything the Store holds; the sweeper goroutine refers to it
// and not to the Store, so a Store that is dropped without Close can still
// be collected.
type state struct {
	seed  maphash.Seed
	epoch time.Time // expiry times are monotonic nanoseconds since epoch

	maxEntries uint64 // 0: unbounded
	// room counts the entries of a bounded store and the changes to that
	// count (see room.go).
	room atomic.Uint64
	_    [16]byte // the shards start on a cache line of their own (a test checks the sizes)

	shards [numShards]shard

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{} // closed when the sweeper has returned; nil without one

	subs subscribers // of Invalidations (see invalidate.go)
}

// shard holds the entries of the keys that hash to it: a map, and a heap
// of their expiries with one item per entry (see expiry.go).
type shard struct {
	mu   sync.Mutex
	seq  uint64 // claims granted by this shard
	m    map[string]entry
	exp  expiryHeap
	peak int // the most entries m held since it was made
	// next is the time of the root of exp (math.MaxInt64 when it is
	// empty), at most the earliest expiry in the shard; written under mu
	// and read without it.
	next atomic.Int64
	// live counts the entries of m and their bytes by state (index
	// state-1), expired entries not removed yet included, for Stats.
	live [2]tally
	// gen counts the rebuilds of m and exp by shrink, which move entries
	// to other slots, for List's cursors.
	gen uint64
	_   [40]byte // whole cache lines: one shard never shares one (a test checks the sizes)
}

// tally is a number of entries and their bytes (see entrySize).
type tally struct{ n, bytes int64 }

type entry struct {
	fingerprint []byte
	data        []byte
	expires     int64  // nanoseconds since state.epoch
	claimed     int64  // nanoseconds since state.epoch
	completed   int64  // nanoseconds since state.epoch: once completed, when; in flight with a keep, the end of its lease (0 without)
	token       uint64 // owner token while in flight; the token that completed it after
	slot        int32  // its slot in the shard's expiry heap
	attempt     uint16 // the claims of the key that ran a handler (saturates)
	state       store.State
}

// kept reports whether e is an in-flight entry claimed with a keep: its
// lease ends at e.completed and its life at e.expires.
func (e *entry) kept() bool { return e.state == store.StateInFlight && e.completed != 0 }

// shown is e's state as the store reports it at now: an in-flight entry
// with a keep whose lease has ended is abandoned.
func (e *entry) shown(now int64) store.State {
	if e.kept() && e.completed <= now {
		return store.StateAbandoned
	}
	return e.state
}

// keep is how long e, a kept in-flight entry, lives beyond its lease.
func (e *entry) keep() time.Duration { return time.Duration(e.expires - e.completed) }

// New returns an empty Store and starts its background sweeper.
func New(opts ...Option) *Store {
	c := newConfig(opts)
	st := &state{
		seed:       maphash.MakeSeed(),
		epoch:      time.Now(),
		maxEntries: uint64(min(c.maxEntries, maxBound)),
		stop:       make(chan struct{}),
	}
	for i := range st.shards {
		st.shards[i].m = make(map[string]entry)
		st.shards[i].next.Store(math.MaxInt64)
	}
	s := &Store{st: st}
	if c.sweepInterval > 0 {
		st.done = make(chan struct{})
		go st.sweepEvery(c.sweepInterval)
		s.cleanup = runtime.AddCleanup(s, (*state).stopSweeper, st)
	}
	return s
}

// Close stops the background sweeper and waits for it to return. It is
// safe to call more than once and always returns nil. The Store keeps
// working after Close: expired entries are then removed when their key is
// touched again, and when a full store bounded by [WithMaxEntries] makes
// room for a new key. A
// Store that is dropped without Close has its sweeper stopped once the
// garbage collector reclaims it, so an interceptor that made a default
// Store does not leak a goroutine.
func (s *Store) Close() error {
	s.cleanup.Stop()
	s.st.stopSweeper()
	if s.st.done != nil {
		<-s.st.done
	}
	return nil
}

// Len returns the number of entries the store holds, including expired
// entries not removed yet. It locks each shard in turn, so it is meant for
// metrics and tests, not for the request path.
func (s *Store) Len() int {
	n := 0
	for i := range s.st.shards {
		sh := &s.st.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

func (st *state) stopSweeper() {
	st.stopOnce.Do(func() { close(st.stop) })
}

// shard returns the shard of key and its number.
func (st *state) shard(key string) (*shard, uint64) {
	i := maphash.String(st.seed, key) & (numShards - 1)
	return &st.shards[i], i
}

// now returns the monotonic time in nanoseconds since the epoch.
func (st *state) now() int64 { return int64(time.Since(st.epoch)) }

// deadline returns now+d, saturating instead of overflowing.
func deadline(now int64, d time.Duration) int64 {
	if int64(d) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(d)
}

// formatToken renders an owner token.
func formatToken(v uint64) string { return strconv.FormatUint(v, 36) }

// parseToken is the exact inverse of formatToken: it accepts only the
// canonical form (lower case, no leading zero), so one token has one
// spelling.
func parseToken(s string) (uint64, bool) {
	if s == "" || s[0] == '0' || len(s) > 13 {
		return 0, false
	}
	var v uint64
	for i := range len(s) {
		c := s[i]
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case 'a' <= c && c <= 'z':
			d = uint64(c-'a') + 10
		default:
			return 0, false
		}
		if v > (math.MaxUint64-d)/36 {
			return 0, false
		}
		v = v*36 + d
	}
	return v, true
}
