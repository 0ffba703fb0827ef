// Package memorystore is an in-memory [store.Store]: the idempotency
// library's default store, for a single process.
//
// Entries live in a fixed number of shards, each a map behind its own
// mutex; a key's shard is chosen with [hash/maphash], so concurrent
// requests for different keys rarely wait on each other. Every operation
// takes effect in one hold of its key's shard lock, so each is a single
// atomic step (a claim in a full store may first visit other shards to
// drop expired entries).
//
// Owner tokens are fencing tokens: each shard counts the claims it grants,
// and a token is that count together with the shard's number, rendered in
// base 36 ("1b", "7ks", ...). A key always lives in the same shard, so the
// tokens granted for one key only ever grow, and no two claims of one
// Store ever get the same token.
//
// Each shard also keeps a heap of its entries' expiries, so that expired
// entries are found without a walk over the map. Expired entries (a lease
// or a retention that ran out) are invisible at once. They are removed
// when their key is next touched, when a full bounded store makes room,
// and by a background sweeper ([WithSweepInterval]) that takes them off
// each shard's heap, holding the lock for at most 256 at a time, and does
// not lock a shard whose heap has nothing due. [Store.Close] stops the
// sweeper; everything else, making room included, keeps working. A shard
// that falls to a quarter of the most entries it held copies the entries
// left into a new map, under its lock, since Go maps never give memory
// back.
//
// [WithMaxEntries] bounds the number of entries. A full store drops expired
// entries to make room for a new key, at O(log n) each under one shard's
// lock, whatever the number of entries; when none have expired it refuses
// the claim with [store.ErrFull]. It never evicts an in-flight claim or a
// completed outcome before its time.
//
// The data that [Store.Claim] returns for a completed key is shared with
// the store and with other callers: treat it as read-only. [Store.Complete]
// copies the data it is given, and [Store.Claim] copies the fingerprint.
//
// # Inspection
//
// A Store is a [store.Inspector] and a [store.Invalidator]. Each entry
// keeps the times it was claimed and completed (the process's clock), so
// [Store.Lookup] reports both. [Store.List] walks the shards in turn, and a
// shard's entries in the order of their slots in its expiry heap, neither
// by key nor by age; a page holds a shard's lock while it examines at most
// Limit slots. [Store.Stats] is exact and costs O(shards): each shard
// counts its entries and their bytes (key, fingerprint and data, as
// [store.Info.Size] counts them) as they come and go. [Store.Purge] tells
// the subscribers of [Store.Invalidations] in this process; it never waits
// for them.
//
// A Store keeps everything in memory: outcomes do not survive a restart and
// are not shared between replicas. Use a networked store such as
// [github.com/grpc-idempotency/idempotency/store/redisstore] when several
// processes serve the same keys.
package memorystore
