// Package memorystore is an in-memory [store.Store]: the idempotency
// library's default store, for a single process.
//
// Entries live in a fixed number of shards, each a map behind its own
// mutex; a key's shard is chosen with [hash/maphash], so concurrent
// requests for different keys rarely wait on each other. Every operation
// locks one shard once, so each is a single atomic step.
//
// Owner tokens are fencing tokens: each shard counts the claims it grants,
// and a token is that count together with the shard's number, rendered in
// base 36 ("1b", "7ks", ...). A key always lives in the same shard, so the
// tokens granted for one key only ever grow, and no two claims of one
// Store ever get the same token.
//
// Expired entries (a lease or a retention that ran out) are invisible at
// once and are removed lazily when their key is next touched, and by a
// background sweeper ([WithSweepInterval]) that visits one shard at a time
// and holds its lock for a bounded number of entries, so callers never wait
// for a whole-store scan. [Store.Close] stops the sweeper.
//
// [WithMaxEntries] bounds the number of entries. A full store drops expired
// entries to make room for a new key; when none have expired it refuses
// the claim with [store.ErrFull]. It never evicts an in-flight claim or a
// completed outcome before its time.
//
// The data that [Store.Claim] returns for a completed key is shared with
// the store and with other callers: treat it as read-only. [Store.Complete]
// copies the data it is given, and [Store.Claim] copies the fingerprint.
//
// A Store keeps everything in memory: outcomes do not survive a restart and
// are not shared between replicas. Use a networked store such as
// [github.com/grpc-idempotency/idempotency/store/redisstore] when several
// processes serve the same keys.
package memorystore
