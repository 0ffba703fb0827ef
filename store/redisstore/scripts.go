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
// that owns the key (the purge script also writes its mark, a key in
// KEYS[1]'s hash slot: see markKey).
//
// The steps of a claim already granted (complete, release, extend,
// abandon) start with the shebang allowOOM, so Redis at maxmemory with
// noeviction still runs them: refusing the completion of a handler that
// ran would let a retry run it again. A script with a shebang declares its
// flags; without allow-oom, Redis would refuse it up front under OOM, even
// one that only reads. The claim scripts (legacy, kept) have no shebang on
// purpose: Redis runs such a script under OOM and refuses only its first
// write of a command that may grow memory, so a claim of a key that holds
// an entry still reads and answers. Shebangs need Redis 7.0 or later.

// allowOOM is the first line of the scripts of the steps of a granted
// claim: Redis runs them, and every command in them, even when used
// memory is over maxmemory.
const allowOOM = "#!lua flags=allow-oom\n"

// readEntry is the start of the fenced scripts. Its function entry reads
// KEYS[1] in either layout and returns:
//
//   - nil when the key holds nothing;
//   - 2, state, owner token, value, header length for a layout 2 string
//     ("i", "k" or "c" as the state; the header ends with the
//     fingerprint);
//   - 1, state, owner token for a layout 1 hash (fields s and o, false
//     when missing);
//   - false and a description for anything else: the Redis type of a key
//     of another type, "string" for a string that is not a well-formed
//     entry (too short for the lengths it gives, or in flight with bytes
//     after its fingerprint, or after the Keep and attempt count of a kept
//     entry).
//
// GET runs first, so an entry of the current layout costs one read; only
// a key of another type (GET answers WRONGTYPE) is asked its TYPE.
//
// keepOf and attemptOf read the Keep (milliseconds) and the attempt count
// of a kept entry's value, its last 12 bytes; abandoned reports whether
// the kept entry under KEYS[1] with value v is abandoned: its PTTL is down
// to its Keep (Redis's clock, frozen while a script runs); ms formats a
// whole number of milliseconds for PEXPIRE and PX.
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
  if #v < hl or (st == 'i' and #v ~= hl) or (st == 'k' and #v ~= hl + 12) then return false, 'string' end
  return 2, st, string.sub(v, 4, 3 + tl), v, hl
end
local function keepOf(v)
  local n = 0
  for i = #v - 11, #v - 4 do n = n * 256 + string.byte(v, i) end
  return n
end
local function attemptOf(v)
  local n = 0
  for i = #v - 3, #v do n = n * 256 + string.byte(v, i) end
  return n
end
local function abandoned(v)
  return redis.call('PTTL', KEYS[1]) <= keepOf(v)
end
local function ms(n) return string.format('%.0f', n) end
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
if s ~= 'i' and s ~= 'k' then return 0 end
if layout == 1 then
  redis.call('HSET', KEYS[1], 's', 'c', 'd', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
redis.call('SET', KEYS[1], string.char(2, 99) .. string.sub(v, 3, hl) .. ARGV[2], 'PX', ARGV[3])
return 1
`)

// releaseScript: ARGV = token. Replies 1 when released (in flight, kept
// or not, abandoned or not), or when the key holds nothing (nothing left to release: the lease ran out, or this is a
// resend of a release that landed), 0 when the key holds an entry the
// token does not own (another owner's, or a completed one), or a
// description of a value that is not an entry.
var releaseScript = newScript(allowOOM + readEntry + `
if layout == nil then return 1 end
if not layout then return s end
if o ~= ARGV[1] or (s ~= 'i' and s ~= 'k') then return 0 end
redis.call('DEL', KEYS[1])
return 1
`)

// extendScript: ARGV = token, lease in milliseconds. Replies 1 when
// extended, 0 when the key is free, the token does not own it or it is
// abandoned (its lease ran out: a duplicate may have been told so), or a
// description of a value that is not an entry. A kept entry keeps its
// Keep beyond the new lease.
var extendScript = newScript(allowOOM + readEntry + `
if layout == nil then return 0 end
if not layout then return s end
if o ~= ARGV[1] then return 0 end
if s == 'k' then
  if abandoned(v) then return 0 end
  redis.call('PEXPIRE', KEYS[1], ms(tonumber(ARGV[2]) + keepOf(v)))
  return 1
end
if s ~= 'i' then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// abandonScript: ARGV = token. Ends the lease of the entry the token owns
// now: a kept entry in flight expires after its Keep (its PTTL is then its
// Keep: abandoned), an entry without Keep is deleted. Replies 1 when done,
// or when the token owns a kept entry already abandoned (left as it is), 0
// when the key is free, the token does not own it or it is completed, or a
// description of a value that is not an entry.
var abandonScript = newScript(allowOOM + readEntry + `
if layout == nil then return 0 end
if not layout then return s end
if o ~= ARGV[1] then return 0 end
if s == 'i' then
  redis.call('DEL', KEYS[1])
  return 1
end
if s ~= 'k' then return 0 end
if not abandoned(v) then redis.call('PEXPIRE', KEYS[1], ms(keepOf(v))) end
return 1
`)

// undoClaimScript undoes a claim that failed (see releaseFailedClaim).
// ARGV = the claim's token. An entry the token owns is deleted, as
// releaseScript does, but for a kept entry past its first attempt: the
// claim took an abandoned entry over, and deleting it would lose that an
// earlier attempt may have run, so it is abandoned instead (PEXPIRE Keep),
// as abandonScript does. Replies as releaseScript.
var undoClaimScript = newScript(allowOOM + readEntry + `
if layout == nil then return 1 end
if not layout then return s end
if o ~= ARGV[1] or (s ~= 'i' and s ~= 'k') then return 0 end
if s == 'k' and attemptOf(v) > 1 then
  if not abandoned(v) then redis.call('PEXPIRE', KEYS[1], ms(keepOf(v))) end
  return 1
end
redis.call('DEL', KEYS[1])
return 1
`)

// keptClaimScript is the second round trip of a claim whose SET found a
// kept entry ('k'), whose state depends on its PTTL. ARGV = the claim's
// token, its value and PX (to claim the key if it is free by now), its
// fingerprint, "1" to take over an abandoned entry with that fingerprint,
// its lease in milliseconds. It reads the key again, as it may have
// changed since the SET, and replies:
//
//   - {"new"} after claiming a key found free;
//   - {"took", old token, attempt} after taking over an abandoned entry
//     with the same fingerprint (TakeOver): the new token, the same Keep
//     and fingerprint, the attempt after the abandoned one, PX lease plus
//     Keep;
//   - {"mine", v}: a kept entry under the claim's own token (this script
//     or the SET, resent by go-redis after a lost reply, made it);
//   - {"inflight", v} or {"abandoned", v}: a kept entry of another owner,
//     in flight or abandoned, left as it is;
//   - {"value", v}: any other layout 2 entry, to decode as SET's answer;
//   - {"other"}: anything else (a layout 1 hash, a value that is not an
//     entry), which the legacy claim script reads.
//
// It has no shebang, as legacyClaimScript: under OOM, it still reads, and
// only its write is refused.
var keptClaimScript = newScript(readEntry + `
if layout == nil then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return {'new'}
end
if layout ~= 2 then return {'other'} end
if s ~= 'k' then return {'value', v} end
if o == ARGV[1] then return {'mine', v} end
if not abandoned(v) then return {'inflight', v} end
local tl = string.byte(v, 3)
if ARGV[5] ~= '1' or string.sub(v, 6 + tl, hl) ~= ARGV[4] then return {'abandoned', v} end
local n = attemptOf(v) + 1
local a = string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
local keep = keepOf(v)
redis.call('SET', KEYS[1], string.char(2, 107, #ARGV[1]) .. ARGV[1] .. string.sub(v, 4 + tl, hl + 8) .. a, 'PX', ms(tonumber(ARGV[6]) + keep))
return {'took', o, n}
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
var scripts = []*script{completeScript, releaseScript, extendScript, abandonScript, keptClaimScript, undoClaimScript, legacyClaimScript}
