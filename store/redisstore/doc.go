// Package redisstore is a [store.Store] on Redis, built on go-redis v9.
// One [Store] serves a single server (redis.NewClient), a Sentinel-managed
// master (redis.NewFailoverClient) and a Redis Cluster
// (redis.NewClusterClient), through redis.UniversalClient.
//
// It needs Redis 7.0 or later: the scripts of the steps of a granted claim
// declare their flags in a shebang line (#!lua flags=allow-oom), which
// earlier versions cannot load: call [Store.LoadScripts] at start-up to
// find out before the first request.
//
// # Layout
//
// Each entry is one Redis hash under the key prefix+key (prefix
// [DefaultPrefix], "idempotency:", unless [WithPrefix] says otherwise),
// with these fields:
//
//	s  state: "i" in flight, "c" completed
//	f  the fingerprint the key was claimed with
//	o  the owner token; kept once completed, as the token that completed
//	   the entry, so a Complete resent with it is recognised
//	d  the data passed to Complete, only once completed
//
// Its TTL, set with PEXPIRE in milliseconds, is the lease while in flight
// and the retention once completed. Owner tokens are 16 random bytes from
// crypto/rand, 22 characters of base64url.
//
// # One round trip per step
//
// Claim, Complete, Release and Extend each run one Lua script on one key
// (EVALSHA, falling back to EVAL when Redis answers NOSCRIPT), so each is
// atomic and one round trip, and each runs on the one Cluster node that
// owns the key. Claim either claims a free key or returns the entry already
// there, with its state, fingerprint and data, in the same round trip.
// Complete, Release and Extend compare the owner token inside the script
// and return [store.ErrLeaseLost] when it no longer owns the key: a caller
// whose lease ran out can never overwrite or delete the next owner's
// entry (Release of a key that holds nothing returns nil: nothing is left
// to release). The first run of a script on a node costs one more round trip
// (NOSCRIPT, then EVAL) unless [Store.LoadScripts] loaded it first.
//
// # Errors
//
// A value under a store key that is not an entry (another Redis type, or
// a hash with a missing or unknown field) gives an error wrapping
// [store.ErrCorrupt], naming the key; the value is left as it is. Network
// and server errors, and a cancelled context, are returned wrapped. A
// Redis out of memory is the subject of the last section.
//
// # Failed claims
//
// A Claim that fails once it was sent may have claimed the key all the
// same. go-redis resends a command whose connection broke (MaxRetries, 3
// by default), so the first send can land while its reply is lost, and
// the resend then fail without running: its dial is refused, or the
// server it reaches answers LOADING, READONLY or MASTERDOWN. Claim then
// runs the release script with the claim's token before it returns the
// error, so that no claim nobody owns blocks the key for a whole lease.
// The token is fresh and random: the release can delete nothing but this
// very claim, and deletes nothing at all when the claim did not land. It
// is skipped only when nothing was sent (a context already done) and when
// Redis answered OOM, which the claim script gives only at the write of a
// free key, so no claim of this token is there.
//
// The release is best effort and bounded by 500 ms, go-redis's retries
// included. When Redis is simply down, it fails like the claim did and
// adds at most that bound to the failure: with go-redis's default retries,
// a failed Claim from a client that has not failed before took 2.2 s
// instead of 1.7 s for the claim script alone; with retries off
// (MaxRetries -1, DialerRetries 1), both take under 2 ms
// (BenchmarkClaimRedisDown). Once go-redis's pool has counted PoolSize
// failed dials it stops dialing until a probe of its own reaches Redis
// again, and the claim and the release then both fail at once. On a connection that stalls instead of failing,
// go-redis bounds the release's reads by the context only when the
// client sets ContextTimeoutEnabled, and by ReadTimeout otherwise.
//
// # Memory
//
// Measured with MEMORY USAGE on Redis 7.0 (TestMemoryPerRecord), for a
// 43-character key (the interceptor's base64url SHA-256), a 33-byte
// fingerprint and 200 bytes of data: 184 bytes in flight, 632 bytes
// completed. Redis keeps a hash whose values all fit in
// hash-max-listpack-value (64 bytes by default) as a compact listpack;
// 200 bytes of data exceed it, so the entry becomes a hashtable. Raising
// hash-max-listpack-value above the usual data size (for example to 1024)
// keeps entries in listpacks: the same entry then costs 424 bytes.
// MEMORY USAGE leaves out the key's slot in the expires table.
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
// use), and the steps of a claim granted before memory ran out (Complete,
// Release, Extend) go through, since their scripts are flagged allow-oom.
// Refusing a Complete would leave a handler that ran without its stored
// outcome, and a retry would run it again once memory came back. So a
// full Redis grows past maxmemory by the outcomes of the handlers that
// were running when it filled up, at most one outcome per claim in
// flight; leave that headroom between maxmemory and the machine's memory.
// TestOutOfMemory shows each of these on a Redis at maxmemory.
package redisstore
