package redisstore

import "github.com/redis/go-redis/v9"

// The scripts work on KEYS[1] alone, so each runs on the one Cluster node
// that owns the key. An entry is a hash:
//
//	s  state: "i" in flight, "c" completed
//	f  fingerprint
//	o  owner token while in flight; once completed, the token that
//	   completed the entry (so a resent Complete is recognised)
//	d  data, only once completed
//
// A key holding anything but a hash is reported by its Redis type, never
// touched, so foreign values are read as corrupt instead of failing inside
// the script.
//
// The steps of a claim already granted (complete, release, extend) start
// with the shebang allowOOM, so Redis at maxmemory with noeviction still
// runs them: refusing the completion of a handler that ran would let a
// retry run it again. A script with a shebang declares its flags; without
// allow-oom, Redis would refuse it up front under OOM, even one that only
// reads. The claim script has no shebang on purpose: Redis runs such a
// legacy script under OOM and refuses only its first write of a command
// that may grow memory (the HSET of a new claim), so a claim of a key
// that holds an entry (a replay, an in-flight duplicate, a resend of this
// very claim) still reads and answers, while a new claim fails with OOM.
// Shebangs need Redis 7.0 or later.

// claimScript: ARGV = fingerprint, token, lease in milliseconds.
// Replies {"new"} after claiming a free key, {"hit", s, f, d} for an
// existing hash (missing fields as nil), or {"type", t} for a key of
// another Redis type. A key this very token already owns replies {"new"}:
// go-redis resent the claim after losing the reply to the first send, and
// the claim is ours.
var claimScript = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then
  redis.call('HSET', KEYS[1], 's', 'i', 'f', ARGV[1], 'o', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'new'}
end
if t ~= 'hash' then
  return {'type', t}
end
local v = redis.call('HMGET', KEYS[1], 's', 'f', 'd', 'o')
if v[1] == 'i' and v[4] == ARGV[2] then
  return {'new'}
end
return {'hit', v[1], v[2], v[3]}
`)

// allowOOM is the first line of the scripts of the steps of a granted
// claim: Redis runs them, and every command in them, even when used
// memory is over maxmemory.
const allowOOM = "#!lua flags=allow-oom\n"

// ownerCheck is the start of extendScript: it returns 0 when the key is
// free or ARGV[1] does not own it, and the Redis type of a key that is not
// a hash.
const ownerCheck = `
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'hash' then
  if t == 'none' then return 0 end
  return t
end
local o = redis.call('HMGET', KEYS[1], 'o', 's')
if o[1] ~= ARGV[1] or o[2] ~= 'i' then
  return 0
end
`

// completeScript: ARGV = token, data, retention in milliseconds. Replies
// 1 when completed, or already completed by this token (a resend after a
// lost reply), 0 when the token does not own the key, or the type of a key
// that is not a hash.
var completeScript = redis.NewScript(allowOOM + `
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'hash' then
  if t == 'none' then return 0 end
  return t
end
local v = redis.call('HMGET', KEYS[1], 'o', 's')
if v[1] ~= ARGV[1] then return 0 end
if v[2] == 'c' then return 1 end
if v[2] ~= 'i' then return 0 end
redis.call('HSET', KEYS[1], 's', 'c', 'd', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// releaseScript: ARGV = token. Replies 1 when released, or when the key
// holds nothing (nothing left to release: the lease ran out, or this is a
// resend of a release that landed), 0 when the key holds an entry the
// token does not own (another owner's, or a completed one), or the type of
// a key that is not a hash.
var releaseScript = redis.NewScript(allowOOM + `
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'hash' then
  if t == 'none' then return 1 end
  return t
end
local o = redis.call('HMGET', KEYS[1], 'o', 's')
if o[1] ~= ARGV[1] or o[2] ~= 'i' then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`)

// extendScript: ARGV = token, lease in milliseconds. Replies as
// completeScript.
var extendScript = redis.NewScript(allowOOM + ownerCheck + `
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// scripts lists every script, for [Store.LoadScripts].
var scripts = []*redis.Script{claimScript, completeScript, releaseScript, extendScript}
