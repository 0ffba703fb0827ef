package idempotency

import (
	"fmt"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// WithMaxResponseBytes sets the largest outcome that is stored for replay:
// the encoded response or error status, with the header and trailer keys
// and values. A larger outcome is returned to the caller, and its key is
// completed with a record that replays FAILED_PRECONDITION with
// [ErrResponseNotRetained], so a retry never runs the handler twice.
// Default 4 MiB. A negative n makes [UnaryServerInterceptor] panic, and
// so does a store that bounds its records ([store.RecordLimiter], such as
// mysqlstore's max_allowed_packet) below n plus 64 KiB for the record's
// own fields.
func WithMaxResponseBytes(n int) ServerOption {
	return serverOptionFunc(func(c *config) {
		if n < 0 {
			c.invalid("WithMaxResponseBytes", "size must not be negative, got %d", n)
		}
		c.maxResponseBytes = n
	})
}

// WithMaxStreamRequestBytes bounds the requests of a keyed streaming call
// ([Server.StreamServerInterceptor]), which are read and held before the
// handler runs so they can be fingerprinted: each message counts its
// encoded size plus 5 bytes (its gRPC frame header, so that a stream of
// empty messages is bounded too). A stream over n bytes fails with
// INVALID_ARGUMENT and [ErrStreamTooLarge] before anything is claimed
// or the handler runs; a retry with the same requests fails the same way.
// Calls without a key are not read ahead, and not bounded. Default 4 MiB.
// A negative n makes [NewServer] panic.
func WithMaxStreamRequestBytes(n int) ServerOption {
	return serverOptionFunc(func(c *config) {
		if n < 0 {
			c.invalid("WithMaxStreamRequestBytes", "size must not be negative, got %d", n)
		}
		c.maxStreamRequest = n
	})
}

// WithRetryAfter sets the delay the server asks a client to wait before
// retrying, in google.rpc.RetryInfo and the grpc-retry-pushback-ms trailer,
// on an in-flight rejection ([ErrKeyInUse]) and when the store is
// unavailable ([ErrStoreUnavailable]) or full ([ErrStoreFull]), so
// clients do not hammer a store that is down. Default 1s. A negative d
// makes [UnaryServerInterceptor] panic.
func WithRetryAfter(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *config) {
		c.notNegative("WithRetryAfter", "delay", d)
		c.retryAfter = d
	})
}

// WithStoreTimeout bounds every store call the interceptor makes. A claim
// is bounded by d and by the caller's deadline. Storing an outcome and
// releasing a claim happen after the handler ran, so they are detached from
// the caller's cancellation (a caller who leaves never strands a claim) and
// retried through transient store errors for up to d in all, each attempt
// bounded by the remaining time and by a third of the lease. A lease
// renewal is bounded by d, by a third of the lease and by the time left on
// the lease. Default 10s. Zero or negative makes [UnaryServerInterceptor]
// panic.
func WithStoreTimeout(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *config) {
		c.positive("WithStoreTimeout", "store timeout", d)
		c.storeTimeout = d
	})
}

// WithHandlerTimeout bounds a claimed handler whose caller has gone. A
// handler running under a claim is not cancelled when its caller cancels or
// its deadline passes, since stopping a charge halfway and letting the
// retry charge again is exactly what idempotency must prevent: it runs on a
// context that keeps the caller's values but not its cancellation, and its
// outcome is stored as usual. That context's deadline is d after the
// handler starts, or the caller's own deadline when that is later. Default
// 1 minute; zero or negative makes [UnaryServerInterceptor] panic. See
// [WithCallerCancellation] for the opt-out.
func WithHandlerTimeout(d time.Duration) ServerOption {
	return serverOptionFunc(func(c *config) {
		c.positive("WithHandlerTimeout", "handler timeout", d)
		c.handlerTimeout = d
	})
}

// WithCallerCancellation cancels claimed handlers when their caller cancels
// or its deadline passes, as gRPC does without this interceptor. Use it for
// handlers whose work is atomic with their error (one database transaction
// that rolls back when its context ends): the cancellation error releases
// the claim, and a retry runs the handler again. [MethodPolicy] sets it per
// method. Default: handlers are detached from their caller
// ([WithHandlerTimeout]).
func WithCallerCancellation() ServerOption {
	return serverOptionFunc(func(c *config) { c.cancellation = CancellationCaller })
}

// WithReplayCache keeps up to maxEntries completed outcomes, taking up to
// maxBytes in all (each entry its store key, fingerprint and record plus
// 192 bytes), in this process, in front of the store: a replay of a cached
// key makes no store call, and is a [DecisionReplayed] event with
// [Event.Cached] set. An entry expires with the record's retention, or ttl
// after it is filled, whichever comes first. A key purged from a store
// that is a [store.Invalidator] (every store of this repository) through
// its Purge, on any server, is dropped from the cache as soon as the store
// tells it; a record removed from the store otherwise (deleted by hand,
// evicted, or from a store that cannot tell purges), or a purge whose
// message was lost, replays from the cache until its entry expires: ttl is
// that bound. Each [Server] has one cache,
// shared by its entry points, and [Server.Close] ends its subscription to
// the purges. Default: no cache. A maxEntries,
// maxBytes or ttl that is zero or negative makes [NewServer] panic.
// [Server.ReplayCacheStats] tells how full it is and what it evicted. What
// it holds, and how to size and watch it, is in [the operations guide].
//
// [the operations guide]: https://github.com/grpc-idempotency/idempotency/blob/main/docs/operations.md#a-replay-cache-in-front-of-the-store
func WithReplayCache(maxEntries int, maxBytes int64, ttl time.Duration) ServerOption {
	return serverOptionFunc(func(c *config) {
		switch {
		case maxEntries <= 0:
			c.invalid("WithReplayCache", "maxEntries must be positive, got %d", maxEntries)
		case maxBytes <= 0:
			c.invalid("WithReplayCache", "maxBytes must be positive, got %d", maxBytes)
		default:
			c.positive("WithReplayCache", "ttl", ttl)
		}
		c.cache = &replayCacheConfig{maxEntries: maxEntries, maxBytes: maxBytes, ttl: ttl}
	})
}

// recordMargin is what a stored record may hold beside the outcome that
// [WithMaxResponseBytes] bounds: the record's own fields (fingerprint,
// times, framing of each header and trailer), the seal of [WithSealing],
// with room to spare.
const recordMargin = 64 << 10

// checkRecordLimit returns an error when s bounds the size of a record
// ([store.RecordLimiter]) below the largest record cfg lets the server
// store: an outcome that fits WithMaxResponseBytes but not the store would
// fail every Complete, and its key would run again once the claim's lease
// ended. A store that does not know its bound yet is not checked.
func checkRecordLimit(s store.Store, cfg *config) error {
	l, ok := s.(store.RecordLimiter)
	if !ok {
		return nil
	}
	limit := l.MaxRecordBytes()
	if need := cfg.maxResponseBytes + recordMargin; limit > 0 && need > limit {
		return fmt.Errorf("idempotency: WithMaxResponseBytes(%d) lets a stored record reach %d bytes (the outcome and up to %d of the record's own), but the store takes records of at most %d bytes; lower WithMaxResponseBytes to at most %d, or raise the store's bound (for MySQL, the server's max_allowed_packet)",
			cfg.maxResponseBytes, need, recordMargin, limit, limit-recordMargin)
	}
	return nil
}
