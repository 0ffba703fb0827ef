package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
)

// Store is a [store.Store] on Redis. Each method is one Lua script on one
// key: one atomic round trip. It is safe for concurrent use.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
}

var _ store.Store = (*Store)(nil)

// New returns a Store on rdb: a redis.Client, a redis.ClusterClient or a
// Sentinel-backed client from redis.NewFailoverClient. The caller owns rdb
// and closes it after the last use of the Store.
//
// A cancelled context is honoured before anything is sent. go-redis bounds
// the network I/O of a call by the client's ReadTimeout and WriteTimeout,
// and by the context's deadline only when the client's options set
// ContextTimeoutEnabled; set it so a caller's deadline bounds every step.
func New(rdb redis.UniversalClient, opts ...Option) *Store {
	c := newConfig(opts)
	return &Store{rdb: rdb, prefix: c.prefix}
}

// LoadScripts loads the store's Lua scripts into the script cache of Redis
// (of every master, on a Cluster). It is optional: each method sends
// EVALSHA and falls back to EVAL when Redis answers NOSCRIPT, which costs
// one extra round trip the first time a script runs on a node (and after a
// restart or SCRIPT FLUSH). Call it at start-up to avoid that, or before
// counting round trips.
func (s *Store) LoadScripts(ctx context.Context) error {
	for _, sc := range scripts {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("redisstore: load scripts: %w", err)
		}
	}
	return nil
}

// Claim implements [store.Store.Claim]. It returns an error wrapping
// [store.ErrFull] when Redis refuses the write of a new claim for lack of
// memory (OOM, with maxmemory-policy noeviction).
//
// When the claim fails with any other error once it was sent, Claim first
// releases, fenced by the claim's fresh token, the claim it may have made
// after all (see Failed claims in the package documentation), so that it
// never leaves behind a claim nobody owns. A context already done is
// reported before anything is sent.
func (s *Store) Claim(ctx context.Context, key string, fingerprint []byte, lease time.Duration) (store.Claim, error) {
	ms, err := millis("lease", lease)
	if err != nil {
		return store.Claim{}, err
	}
	rkey := s.prefix + key
	if err := ctx.Err(); err != nil {
		return store.Claim{}, fmt.Errorf("redisstore: claim %q: %w", rkey, err)
	}
	token := newToken()
	reply, err := claimScript.Run(ctx, s.rdb, []string{rkey}, fingerprint, token, ms).Result()
	if err != nil {
		if redis.HasErrorPrefix(err, "OOM") {
			// The script answers OOM only at the write of a free key: a
			// resend that found this token's own earlier claim would have
			// won without writing. No claim of ours is there to release.
			return store.Claim{}, fmt.Errorf("redisstore: claim %q: %w: %w", rkey, store.ErrFull, err)
		}
		s.releaseFailedClaim(ctx, rkey, token)
		return store.Claim{}, fmt.Errorf("redisstore: claim %q: %w", rkey, err)
	}
	c, err := decodeClaimReply(reply, token)
	if err != nil {
		return store.Claim{}, fmt.Errorf("redisstore: claim %q: %w", rkey, err)
	}
	return c, nil
}

// Complete implements [store.Store.Complete]. When the key holds a value
// that is not an entry, the error matches both [store.ErrLeaseLost] and
// [store.ErrCorrupt].
func (s *Store) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	ms, err := millis("retention", retention)
	if err != nil {
		return err
	}
	return s.fenced(ctx, "complete", completeScript, key, token, data, ms)
}

// Release implements [store.Store.Release]. It returns nil when the key
// holds nothing, so a release that go-redis resent after the first send
// had landed reports success. When the key holds a value that is not an
// entry, the error matches both [store.ErrLeaseLost] and
// [store.ErrCorrupt].
func (s *Store) Release(ctx context.Context, key, token string) error {
	return s.fenced(ctx, "release", releaseScript, key, token)
}

// Extend implements [store.Store.Extend]. When the key holds a value that
// is not an entry, the error matches both [store.ErrLeaseLost] and
// [store.ErrCorrupt].
func (s *Store) Extend(ctx context.Context, key, token string, lease time.Duration) error {
	ms, err := millis("lease", lease)
	if err != nil {
		return err
	}
	return s.fenced(ctx, "extend", extendScript, key, token, ms)
}

// fenced runs a script that acts only while token owns key.
func (s *Store) fenced(ctx context.Context, op string, sc *redis.Script, key, token string, args ...any) error {
	rkey := s.prefix + key
	if token == "" && sc != releaseScript {
		// No claim has an empty token: nothing to ask Redis. A release
		// asks, since its answer depends on whether the key holds an
		// entry.
		return fmt.Errorf("redisstore: %s %q: empty token: %w", op, rkey, store.ErrLeaseLost)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: %s %q: %w", op, rkey, err)
	}
	reply, err := sc.Run(ctx, s.rdb, []string{rkey}, append([]any{token}, args...)...).Result()
	if err == nil {
		err = decodeFencedReply(reply)
	}
	if err != nil {
		return fmt.Errorf("redisstore: %s %q: %w", op, rkey, err)
	}
	return nil
}

// failedClaimReleaseTimeout bounds the release that follows a failed
// claim, retries included.
const failedClaimReleaseTimeout = 500 * time.Millisecond

// releaseFailedClaim deletes the claim token may have made although the
// claim failed. Any failure after the first send may hide a claim that
// landed: a reply lost to a cut connection or a timeout, or a reply lost
// and then a resend by go-redis that failed in turn (a dial error, or an
// error reply such as LOADING, READONLY or MASTERDOWN from a server that
// never saw the first send). The caller is told the claim failed, so a
// claim that did land would block the key for a whole lease with no
// handler running. The release is fenced by the token, fresh and random,
// so it can only delete this caller's own claim, and releasing a key that
// holds nothing of ours changes nothing. Best effort: errors are ignored.
func (s *Store) releaseFailedClaim(ctx context.Context, rkey, token string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failedClaimReleaseTimeout)
	defer cancel()
	_ = releaseScript.Run(ctx, s.rdb, []string{rkey}, token).Err()
}

// millis converts a TTL to whole milliseconds for PEXPIRE, rounding up so
// that a TTL under a millisecond does not become 0, which deletes the key.
func millis(what string, d time.Duration) (int64, error) {
	if d <= 0 {
		return 0, fmt.Errorf("redisstore: %s must be positive, got %v", what, d)
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond), nil
}

// newToken returns a fresh owner token: 16 random bytes in unpadded
// base64url, 22 characters.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails, see crypto/rand.Read
	return base64.RawURLEncoding.EncodeToString(b[:])
}
