// Package redisstore is a [store.Store] on Redis, built on go-redis v9.
// One [Store] serves a single server (redis.NewClient), a Sentinel-managed
// master (redis.NewFailoverClient) and a Redis Cluster
// (redis.NewClusterClient), through redis.UniversalClient.
//
// It needs Redis 7.0 or later: a claim is SET with both NX and GET, and the
// scripts of the steps of a granted claim declare their flags in a shebang
// line (#!lua flags=allow-oom); earlier versions refuse both. Call
// [Store.LoadScripts] at start-up to find out before the first request.
//
// # Layout
//
// Each entry is one Redis string under the key prefix+key (prefix
// [DefaultPrefix], "idempotency:", unless [WithPrefix] says otherwise):
//
//	version      1 byte, 2: the layout
//	state        1 byte, 'i' in flight, 'k' in flight and kept, 'c'
//	             completed
//	token length 1 byte
//	token        the owner token; kept once completed, as the token that
//	             completed the entry, so a Complete resent with it is
//	             recognised
//	fp length    2 bytes, big-endian
//	fingerprint  the fingerprint the key was claimed with
//	keep         8 bytes, big-endian, only when kept: Keep in milliseconds
//	attempt      4 bytes, big-endian, only when kept: the attempt count
//	data         the data passed to Complete, only once completed
//
// Its TTL, in milliseconds, is the lease while in flight and the retention
// once completed. A claim with [store.ClaimOptions.Keep] writes a kept
// entry, state 'k', whose TTL is the lease plus Keep: its lease is over
// once the key's PTTL is down to Keep or less (Redis's clock), and it is
// then abandoned ([store.StateAbandoned]) until it expires. Nothing is
// written when a lease runs out: every step that cares (a claim that
// finds the entry, Extend, Abandon, Lookup, List, Stats) compares the PTTL
// with Keep. A claim without Keep writes an 'i' entry, byte for byte as
// releases before kept entries did, so their servers still read it; a
// server of such a release reads a 'k' entry as corrupt. A take-over
// rewrites the entry with its new token and the next attempt count,
// keeping Keep and the fingerprint; a completion drops Keep and the
// attempt count (a completed entry's Info.Attempt is 0: unknown). Owner tokens are made by [store.NewToken]: 25
// characters that carry the claim time (the claiming server's clock, in
// milliseconds) and 96 random bits; tokens of earlier releases, 22
// characters of random base64url, are still owned, and their claim time
// is unknown. A fingerprint over 65,535 bytes is refused (the
// interceptor's are 33).
//
// Releases before this one wrote layout 1, a hash with fields s (state,
// "i" or "c"), f (fingerprint), o (owner token) and d (data). Such entries
// are still read and settled, so a rolling upgrade loses none of them: a
// claim of such a key (SET answers WRONGTYPE) reads it with a script, one
// more round trip, and the steps of its owner (complete, release, extend)
// work on it in place. They end with their retention. A server of an
// earlier release reads a layout 2 entry as corrupt (it answers
// IDEMPOTENCY_RECORD_CORRUPT, and never runs the handler): finish a
// rolling upgrade before relying on replays across versions.
//
// # One round trip per step
//
// Claim is one native command on one key,
//
//	SET key entry NX GET PX lease
//
// which claims a free key or returns the entry already there, all that a
// replay or an in-flight duplicate needs. With Keep, the entry is a kept
// one and PX the lease plus Keep: still one round trip for a claim of a
// free key and for a replay. A SET that finds a kept entry of another
// claim cannot tell from the entry alone whether its lease ran out, so
// one more round trip, a script on the key, reads it again with its PTTL
// and answers it in flight or abandoned, or, with
// [store.ClaimOptions.TakeOver], takes an abandoned entry with the same
// fingerprint over in the same atomic step (the duplicate of a kept claim
// pays two round trips). A claim resent by go-redis after losing the first
// reply finds its own token in the entry, and is won.
// Complete, Release, Extend and Abandon each run one Lua script on one key
// (EVALSHA, falling back to EVAL when Redis answers NOSCRIPT), which
// compares the owner token and returns [store.ErrLeaseLost] when it no
// longer owns the key: a caller whose lease ran out can never overwrite or
// delete the next owner's entry (Release of a key that holds nothing
// returns nil: nothing is left to release). Each step is atomic and runs
// on the one Cluster node that owns the key. The first run of a script on
// a node costs one more round trip (NOSCRIPT, then EVAL) unless
// [Store.LoadScripts] loaded it first. An executed call costs Redis four
// commands (SET; EVALSHA, GET, SET) and a replay one (SET), as counted by
// INFO commandstats.
//
// # Shared round trips
//
// Concurrent calls share round trips. Per Redis node, a store call that
// finds fewer than two batches on the wire is sent at once, as it is; calls
// that arrive while two are on the wire queue, and go out together as one
// pipeline as soon as one returns. Nothing waits on a timer, so a lone
// caller's latency is that of its own round trip, and each call still
// costs its caller one round trip per step; under load, one read and one
// write carry the commands of many calls, for Redis and for the client.
// When no batch has come back for 5 ms (a connection that broke is being
// redialled and resent by go-redis), arriving calls open more batches, up
// to eight, so one broken connection does not hold up every call. A caller
// whose context ends while its call is queued gets its context's error at
// once, and its command is never sent; a caller whose context ends once its
// call went out in a batch also gets its context's error at once, and its
// command may still run: go-redis may still be sending the batch, or
// resending it after a broken connection. A claim is then released, as
// after any failed claim, but only once that batch is back, so that the
// release never runs before the claim it undoes. [WithoutPipelining]
// turns this off.
//
// On a Cluster, the store sends each call to the client of the master that
// owns its key (ClusterClient.MasterForKey), so that a WAIT
// ([WithMinReplicas]) runs on the connection that made the write it waits
// for, and follows MOVED and ASK itself, as the ClusterClient would:
// MOVED sends the call to the node named and reloads the slot map, ASK
// sends it there after ASKING, each one more round trip while slots move.
// go-redis hooks on a ClusterClient see its own commands only: add hooks
// for the store's commands to the node clients with
// ClusterClient.OnNewNode (as redisotel does).
//
// # Replica acknowledgement
//
// Redis replicates asynchronously: a master acknowledges a write before
// any replica has it, and a failover that promotes a replica loses the
// writes that had not reached it. For the store, a lost claim lets a
// retry run the handler while the first run goes on, and a lost completion
// lets a retry run it again. [WithMinReplicas] (n, timeout) sends WAIT n
// timeout after every claim and completion (and after the script of a
// claim that finds a kept entry, which may take it over), in the same
// pipeline, on the same connection: still one round trip per step. A new claim that fewer
// than n replicas acknowledged in time is released and fails with
// [ErrTooFewReplicas]; the interceptor answers UNAVAILABLE, and the client
// retries. A completion that fewer than n acknowledged fails the same way;
// the interceptor retries it, and a Complete repeated by its owner is a
// no-op success that makes a write (the same expiry, written again) so
// that its own WAIT covers the completion, whatever connection made it. A
// resent claim that finds its own token extends its lease with a WAIT of
// its own, one more round trip, for the same reason.
//
// What WAIT promises: once a step returns, n replicas hold it. What it
// does not: WAIT is not consensus. The write stays on the master when too
// few replicas acknowledge it (the step reports an error, and a failover
// may or may not keep it); a failover keeps an acknowledged write only if
// it promotes a replica that has it (Sentinel promotes, among the replicas
// of the best priority, the one with the most recent replication offset,
// and a Cluster replica's election delay grows with how far behind it is:
// with equal priorities and n = 1, the replica promoted is one that
// acknowledged every write the others did, but a replica priority, a
// manual failover or a replica cut off for long can pick another); and
// without persistence, a replica that restarts forgets what it
// acknowledged. Releases and lease extensions are not waited for: a lost
// release leaves its key in flight until its lease ends, and a lost
// extension leaves the last one replicated. While fewer than n replicas
// answer, every new claim fails after the timeout, and replays and the
// other steps sharing a round trip with a claim wait for it too. Keep the
// lease and WithStoreTimeout of the interceptor above the time a failover
// takes, so that a claim that survives it is still there when its
// completion, held back by the failover, arrives.
//
// # Inspection
//
// A Store is a [store.Inspector] and a [store.Invalidator], for an admin
// service or a command line. [Store.Lookup] is one read-only script on the
// key, one round trip; [Store.Purge] is one script that checks the entry's
// state and owner token, deletes it and publishes the key on the Redis
// channel prefix+"purged" for [Store.Invalidations], in one atomic step:
// one round trip with [store.PurgeOptions.Token], two without, as the
// store then looks the entry up first and fences the script with the
// token it found. go-redis resends a script whose connection broke
// (MaxRetries), and the first send may have run while its reply was
// lost: as every purge script is fenced by a token, the resend deletes
// nothing claimed since, and the mark the first send left (a key under the
// prefix and in the key's hash slot, which holds the purged entry for a
// minute) makes the
// resend answer what the first send purged (decision 318 of
// docs/semantics; TestPurgeResentAfterReplyLost).
// An entry's claim time is read from its owner token (the
// claiming server's clock, to the millisecond; unknown for a token of an
// earlier release), and its completion time is not kept by the layout:
// Info.Completed is zero. A kept entry in flight Expires at the end of its
// lease, an abandoned one at the end of its Keep; Info.Attempt is the
// count a kept entry holds, 1 for an entry in flight without Keep, and 0
// (unknown) once completed. [Store.List] is one SCAN step per page, in
// SCAN's order (not by age), one master after another on a Cluster.
// [Store.Stats] samples the first 1,000 keys of each master's key space
// and scales the counts by DBSIZE: exact on a master with fewer keys, an
// estimate (Stats.Estimated) otherwise, at a bounded cost of one round trip
// and about a millisecond of each master's time. The methods' documentation
// gives the details. [Store.LoadScripts] loads their scripts too.
//
// # Errors
//
// A value under a store key that is not an entry (another Redis type, a
// string that is not a well-formed layout 2 entry, or a hash with a
// missing or unknown field) gives an error wrapping [store.ErrCorrupt],
// naming the key; the value is left as it is. Network and server errors,
// and a cancelled context, are returned wrapped. A Redis out of memory is
// the subject of the last section.
//
// # Failed claims
//
// A Claim that fails once it was sent may have claimed the key all the
// same. go-redis resends a command (or a pipeline) whose connection broke
// (MaxRetries, 3 by default), so the first send can land while its reply
// is lost, and the resend then fail without running: its dial is refused,
// or the server it reaches answers LOADING, READONLY or MASTERDOWN. Claim
// then runs the release script with the claim's token before it returns
// the error, so that no claim nobody owns blocks the key for a whole
// lease. The token is fresh and random: the release can delete nothing but
// this very claim, and deletes nothing at all when the claim did not land.
// A claim that took an abandoned entry over (its attempt count is over 1)
// is abandoned again instead of deleted: the entry keeps telling the next
// claim that an earlier attempt may have run (the failed take-over counts
// as an attempt; the abandoned owner's token no longer owns it).
// It is skipped only when the SET was never sent (a context already done,
// or a queued call whose context ended) and when Redis answered OOM with
// nothing under the key. A command the claim needs after its SET (the GET
// under OOM, the script that reads a kept entry and may take it over, the
// extension of a resent claim with [WithMinReplicas]) that
// fails, or is dropped unsent because its caller left, releases the same
// way.
//
// The release is best effort and bounded by 500 ms, go-redis's retries
// included. When Redis is simply down, it fails like the claim did and
// adds at most that bound to the failure: with go-redis's default retries,
// a failed Claim from a client that has not failed before took 2.2 s
// instead of 1.7 s for the claim alone; with retries off (MaxRetries -1,
// DialerRetries 1), both take under 2 ms (this package's benchmarks). Once
// go-redis's pool has counted PoolSize failed dials it stops dialing until
// a probe of its own reaches Redis again, and the claim and the release
// then both fail at once. On a connection that stalls instead of failing,
// go-redis bounds the release's reads by the context only when the client
// sets ContextTimeoutEnabled, and by ReadTimeout otherwise. A failover
// during which a claim landed and replicated but lost its reply leaves the
// key in flight until its lease ends: the release cannot reach a master in
// time.
//
// # Memory
//
// Measured with MEMORY USAGE on Redis 7.0 (by this package's tests), for a
// 43-character key (the interceptor's base64url SHA-256), a 33-byte
// fingerprint and 200 bytes of data: 184 bytes in flight, 424 bytes
// completed (layout 1 took 184 and 632, or 424 with
// hash-max-listpack-value raised above the data size). MEMORY USAGE leaves
// out the key's slot in the expires table: counting it and the hash
// tables' share, 100,000 completed entries grew used_memory by 487 bytes
// each, 738 in layout 1 (by this package's benchmarks).
//
// # Eviction and a full Redis
//
// Run Redis with maxmemory-policy noeviction (the Redis default) for the
// keys of this store. An eviction policy may delete an in-flight entry
// while its handler runs: a retry with the same key then claims a free key
// and the handler runs twice. Evicting completed entries is just as bad: a
// retry runs again instead of getting the stored answer.
//
// With noeviction, a Redis whose used memory is over maxmemory refuses
// new claims: Claim returns an error wrapping [store.ErrFull], which the
// interceptor answers with RESOURCE_EXHAUSTED and IDEMPOTENCY_STORE_FULL,
// and nothing is written. Everything else goes on: a Claim of a key that
// holds an entry still answers (a replay, a duplicate told the key is in
// use; Redis refuses SET before it runs under OOM, even on such a key, so
// the store reads it with a GET, one more round trip, only while Redis is
// full), and the steps of a claim granted before memory ran out
// (Complete, Release, Extend, Abandon) go through, since their scripts are
// flagged allow-oom. A take-over of an abandoned entry writes a new claim,
// and is refused as one ([store.ErrFull]); the entry stays abandoned.
// Refusing a Complete would leave a handler that ran without its stored
// outcome, and a retry would run it again once memory came back. So a
// full Redis grows past maxmemory by the outcomes of the handlers that
// were running when it filled up, at most one outcome per claim in
// flight; leave that headroom between maxmemory and the machine's memory.
// This package's tests show each of these on a Redis at maxmemory.
package redisstore
