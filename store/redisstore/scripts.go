package redisstore

import "github.com/redis/go-redis/v9"

// script is a Lua script the store runs with EVALSHA, falling back to EVAL
// when Redis answers NOSCRIPT.
type script struct {
	src, sha string
}

func newScript(src string) *script {
	return &script{src: src, sha: redis.NewScript(src).Hash()}
}

// Every script works on KEYS[1] alone, so it runs on the one Cluster node
// that owns the key.
//
// The steps of a claim already granted (complete, release, extend) start
// with the shebang allowOOM, so Redis at maxmemory with noeviction still
// runs them: refusing the completion of a handler that ran would let a
// retry run it again. A script with a shebang declares its flags; without
// allow-oom, Redis would refuse it up front under OOM, even one that only
// reads. The legacy claim script has no shebang on purpose: Redis runs such
// a script under OOM and refuses only its first write of a command that
// may grow memory, so a claim of a key that holds an entry still reads and
// answers. Shebangs need Redis 7.0 or later.

// allowOOM is the first line of the scripts of the steps of a granted
// claim: Redis runs them, and every command in them, even when used
// memory is over maxmemory.
const allowOOM = "#!lua flags=allow-oom\n"

// readEntry is the start of the fenced scripts. Its function entry reads
// KEYS[1] in either layout and returns:
//
//   - nil when the key holds nothing;
//   - 2, state, owner token, value, header length for a layout 2 string
//     ("i" or "c" as the state);
//   - 1, state, owner token for a layout 1 hash (fields s and o, false
//     when missing);
//   - false and a description for anything else: the Redis type of a key
//     of another type, "string" for a string that is not a well-formed
//     entry (too short for the lengths it gives, or in flight with bytes
//     after its fingerprint).
//
// GET runs first, so an entry of the current layout costs one read; only
// a key of another type (GET answers WRONGTYPE) is asked its TYPE.
const readEntry = `
local function entry()
  local v = redis.pcall('GET', KEYS[1])
  if type(v) == 'table' then
    local t = redis.call('TYPE', KEYS[1]).ok
    if t ~= 'hash' then return false, t end
    local h = redis.call('HMGET', KEYS[1], 's', 'o')
    return 1, h[1], h[2]
  end
  if not v then return nil end
  if #v < 5 or string.byte(v, 1) ~= 2 then return false, 'string' end
  local tl = string.byte(v, 3)
  if #v < 5 + tl then return false, 'string' end
  local hl = 5 + tl + string.byte(v, 4 + tl) * 256 + string.byte(v, 5 + tl)
  local st = string.sub(v, 2, 2)
  if #v < hl or (st == 'i' and #v ~= hl) then return false, 'string' end
  return 2, st, string.sub(v, 4, 3 + tl), v, hl
end
local layout, s, o, v, hl = entry()
`

// completeScript: ARGV = token, data, retention in milliseconds. Replies
// 1 when completed, or already completed by this token (a resend after a
// lost reply, or a retry after too few replicas acknowledged: see below),
// 0 when the token does not own the key, or a description of a value that
// is not an entry.
//
// An entry this token already completed is left as it is, but its expiry
// is written again, to the same instant (PEXPIRETIME, then PEXPIREAT): a
// write that changes nothing, so that a WAIT sent after this script on the
// same connection waits for the replicas to reach this point of the
// replication stream, which includes the completion, whichever connection
// wrote it. Redis documents WAIT as counting the writes of its own
// connection; Redis 7.0 in fact waits for the offset the connection's
// previous command saw, write or not, which covers the completion
// already; the write keeps the promise on any version, on a path only a
// retry takes.
var completeScript = newScript(allowOOM + readEntry + `
if layout == nil then return 0 end
if not layout then return s end
if o ~= ARGV[1] then return 0 end
if s == 'c' then
  local at = redis.call('PEXPIRETIME', KEYS[1])
  if at > 0 then redis.call('PEXPIREAT', KEYS[1], at) end
  return 1
end
if s ~= 'i' then return 0 end
if layout == 1 then
  redis.call('HSET', KEYS[1], 's', 'c', 'd', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
redis.call('SET', KEYS[1], string.char(2, 99) .. string.sub(v, 3) .. ARGV[2], 'PX', ARGV[3])
return 1
`)

// releaseScript: ARGV = token. Replies 1 when released, or when the key
// holds nothing (nothing left to release: the lease ran out, or this is a
// resend of a release that landed), 0 when the key holds an entry the
// token does not own (another owner's, or a completed one), or a
// description of a value that is not an entry.
var releaseScript = newScript(allowOOM + readEntry + `
if layout == nil then return 1 end
if not layout then return s end
if o ~= ARGV[1] or s ~= 'i' then return 0 end
redis.call('DEL', KEYS[1])
return 1
`)

// extendScript: ARGV = token, lease in milliseconds. Replies 1 when
// extended, 0 when the key is free or the token does not own it, or a
// description of a value that is not an entry.
var extendScript = newScript(allowOOM + readEntry + `
if layout == nil then return 0 end
if not layout then return s end
if o ~= ARGV[1] or s ~= 'i' then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// legacyClaimScript is the claim of a key that holds something other than
// a string: SET answered WRONGTYPE. ARGV = the new claim's layout 2 value,
// lease in milliseconds. A layout 1 hash is read: {"hit", s, f, d} (missing fields
// as nil). A key of another type gives {"type", t}. A key
// that changed under the claim (deleted, or now a string) is claimed as
// SET would have: {"new"} after writing the value, {"value", v} with the
// string found. It has no shebang: see above.
var legacyClaimScript = newScript(`
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'hash' then
  local v = redis.call('HMGET', KEYS[1], 's', 'f', 'd')
  return {'hit', v[1], v[2], v[3]}
end
if t ~= 'none' and t ~= 'string' then return {'type', t} end
local old = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'PX', ARGV[2])
if old then return {'value', old} end
return {'new'}
`)

// scripts lists every script, for [Store.LoadScripts].
var scripts = []*script{completeScript, releaseScript, extendScript, legacyClaimScript}
