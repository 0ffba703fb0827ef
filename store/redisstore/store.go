package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
)

// Store is a [store.Store] on Redis. Each step is one command on one key:
// one round trip, shared with the steps of concurrent calls. It is safe
// for concurrent use.
type Store struct {
	rdb          redis.UniversalClient
	cluster      *redis.ClusterClient // rdb, when it is a Cluster client
	prefix       string
	pipelining   bool
	minReplicas  int
	waitTimeout  time.Duration
	maxRedirects int
	markTTL      time.Duration // of a purge's mark: purgeMarkTTL

	batch    *batcher // the batcher of rdb, when it is not a Cluster client
	batchers sync.Map // *redis.Client of a Cluster master -> *batcher
}

var _ store.Store = (*Store)(nil)

// ErrTooFewReplicas is wrapped by the error of a claim or completion that
// fewer replicas acknowledged than [WithMinReplicas] asks for. The write
// was made on the master all the same.
var ErrTooFewReplicas = errors.New("redisstore: too few replicas acknowledged the write")

// New returns a Store on rdb: a redis.Client, a redis.ClusterClient or a
// Sentinel-backed client from redis.NewFailoverClient. The caller owns rdb
// and closes it after the last use of the Store.
//
// A cancelled context is honoured before anything is sent, and while a
// call waits for a round trip shared with others. go-redis bounds the
// network I/O of a round trip by the client's ReadTimeout and
// WriteTimeout, and by the context's deadline only when the client's
// options set ContextTimeoutEnabled; set it so a caller's deadline bounds
// every step.
//
// New panics on an invalid [WithMinReplicas].
func New(rdb redis.UniversalClient, opts ...Option) *Store {
	c := newConfig(opts)
	s := &Store{
		rdb: rdb, prefix: c.prefix, pipelining: c.pipelining,
		minReplicas: c.minReplicas, waitTimeout: c.waitTimeout, maxRedirects: 3,
		markTTL: purgeMarkTTL,
	}
	readTimeout := time.Duration(0)
	switch r := rdb.(type) {
	case *redis.Client:
		readTimeout = r.Options().ReadTimeout
	case *redis.ClusterClient:
		s.cluster = r
		readTimeout = r.Options().ReadTimeout
		s.maxRedirects = max(r.Options().MaxRedirects, 1)
	}
	if s.minReplicas > 0 && readTimeout > 0 && s.waitTimeout >= readTimeout {
		panic(fmt.Sprintf("redisstore: WithMinReplicas timeout %v is not below the client's ReadTimeout %v", s.waitTimeout, readTimeout))
	}
	if s.cluster == nil && s.pipelining {
		s.batch = s.newBatcher(rdb)
	}
	return s
}

// newBatcher returns the batcher of requests sent to c.
func (s *Store) newBatcher(c client) *batcher {
	return &batcher{send: func(ctx context.Context, reqs []*request) { s.send(ctx, c, reqs) }, stallAfter: stallAfter}
}

// LoadScripts loads the store's Lua scripts into the script cache of Redis
// (of every master, on a Cluster). It is optional: Complete, Release and
// Extend send EVALSHA and fall back to EVAL when Redis answers NOSCRIPT,
// which costs one extra round trip the first time a script runs on a node
// (and after a restart or SCRIPT FLUSH). A claim is a native SET, and needs
// a script only for a key of the earlier layout, or to release a claim that
// failed. The methods of [store.Inspector] run scripts too. Call it at
// start-up to avoid that, or before counting round trips.
func (s *Store) LoadScripts(ctx context.Context) error {
	for _, sc := range slices.Concat(scripts, inspectScripts) {
		if err := redis.NewScript(sc.src).Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("redisstore: load scripts: %w", err)
		}
	}
	return nil
}

// Complete implements [store.Store.Complete]. When the key holds a value
// that is not an entry, the error matches both [store.ErrLeaseLost] and
// [store.ErrCorrupt]. With [WithMinReplicas], a completion too few
// replicas acknowledged returns an error wrapping [ErrTooFewReplicas]; the
// same Complete repeated is a no-op success that waits again.
func (s *Store) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	ms, err := millis("retention", retention)
	if err != nil {
		return err
	}
	if err := s.noClaimHas("complete", key, token); err != nil {
		return err
	}
	return s.fenced(ctx, "complete", completeScript, key, token, s.minReplicas > 0, data, ms)
}

// Release implements [store.Store.Release]. It returns nil when the key
// holds nothing, so a release that go-redis resent after the first send
// had landed reports success. When the key holds a value that is not an
// entry, the error matches both [store.ErrLeaseLost] and
// [store.ErrCorrupt].
func (s *Store) Release(ctx context.Context, key, token string) error {
	return s.fenced(ctx, "release", releaseScript, key, token, false)
}

// Extend implements [store.Store.Extend]. When the key holds a value that
// is not an entry, the error matches both [store.ErrLeaseLost] and
// [store.ErrCorrupt].
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	ms, err := millis("lease", lease)
	if err != nil {
		return err
	}
	if err := s.noClaimHas("extend", key, token); err != nil {
		return err
	}
	return s.fenced(ctx, "extend", extendScript, key, token, false, ms)
}

// noClaimHas returns [store.ErrLeaseLost], without asking Redis, for a
// token no claim can have. Release asks all the same: its answer depends
// on whether the key holds an entry.
func (s *Store) noClaimHas(op, key, token string) error {
	if token != "" && len(token) <= maxTokenLen {
		return nil
	}
	return fmt.Errorf("redisstore: %s %q: no claim has this token: %w", op, s.prefix+key, store.ErrLeaseLost)
}

// runFenced sends r, a fenced script, and decodes its reply. An error
// from sending comes with [Store.do]'s wasSent; any later one means r was
// sent.
func (s *Store) runFenced(r *request) (wasSent bool, err error) {
	if wasSent, err = s.do(r.ctx, r); err != nil {
		return wasSent, err
	}
	reply, err := r.cmd.Result()
	if err == nil {
		err = decodeFencedReply(reply)
	}
	return true, err
}

// fenced runs a script that acts only while token owns key, followed by a
// WAIT when wait is set.
func (s *Store) fenced(ctx context.Context, op string, sc *script, key, token string, wait bool, args ...any) error {
	rkey := s.prefix + key
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: %s %q: %w", op, rkey, err)
	}
	r := newScriptRequest(ctx, sc, rkey, wait, token, args...)
	_, err := s.runFenced(r)
	if err == nil && wait {
		err = s.acked(r)
	}
	if err != nil {
		return fmt.Errorf("redisstore: %s %q: %w", op, rkey, err)
	}
	return nil
}

// acked returns nil when the WAIT that followed r's write counted at least
// the replicas [WithMinReplicas] asks for.
func (s *Store) acked(r *request) error {
	switch {
	case r.waitErr != nil:
		return fmt.Errorf("WAIT %d: %w", s.minReplicas, r.waitErr)
	case r.acks < int64(s.minReplicas):
		return fmt.Errorf("%w: %d of %d within %v", ErrTooFewReplicas, r.acks, s.minReplicas, s.waitTimeout)
	}
	return nil
}

// millis converts a TTL to whole milliseconds for PX and PEXPIRE, rounded
// up so that a TTL under a millisecond does not become 0, which deletes
// the key; every positive TTL, up to math.MaxInt64, is one Redis takes.
func millis(what string, d time.Duration) (int64, error) {
	n, ok := store.Units(d, time.Millisecond)
	if !ok {
		return 0, fmt.Errorf("redisstore: %s must be positive, got %v", what, d)
	}
	return n, nil
}
