package redisstore

// The scripts of the store.Inspector. Lookup works on KEYS[1], and Purge
// on KEYS[1] and a key in its hash slot, on the node that owns the key; List and Stats take no key and run on
// one master each, scanning its keys (allow-cross-slot-keys: on a Cluster
// a script may touch only the keys of one slot unless it says so).

// describeEntry is the start of lookupScript and purgeScript: it reads
// KEYS[1] with readEntry and sets d to a description of the entry for
// decodeDescription, or returns from the script:
//
//   - {'none'} when the key holds nothing;
//   - {'corrupt', t} when it holds a value that is not an entry, t its
//     Redis type;
//   - otherwise d is {'s', value, expiry, pttl} for a layout 2 string,
//     or {'h', s, f, o, d, expiry} for a layout 1 hash (a missing field
//     is false), expiry the key's PEXPIRETIME and pttl its PTTL (which
//     tells whether a kept entry is abandoned).
const describeEntry = readEntry + `
if layout == nil then return {'none'} end
if not layout then return {'corrupt', s} end
if s ~= 'i' and s ~= 'c' and s ~= 'k' then return {'corrupt', 'state'} end
local d
if layout == 2 then
  d = {'s', v, redis.call('PEXPIRETIME', KEYS[1]), redis.call('PTTL', KEYS[1])}
else
  local h = redis.call('HMGET', KEYS[1], 's', 'f', 'o', 'd')
  d = {'h', h[1], h[2], h[3], h[4], redis.call('PEXPIRETIME', KEYS[1])}
end
`

// lookupScript: ARGV = unused. Replies {'found', d}, {'none'} or
// {'corrupt', t} (see describeEntry). It writes nothing, so Redis runs it
// on a replica too, and past maxmemory.
var lookupScript = newScript("#!lua flags=no-writes,allow-oom\n" + describeEntry + `
return {'found', d}
`)

// purgeScript: KEYS = the entry's key and the purge's mark (a key in the
// same hash slot, named for this purge alone: see markKey). ARGV = the
// state to purge ('i': in flight or abandoned, kept or not; or 'c'), the
// owner token to purge, the channel of Invalidations, the key to publish,
// the mark's TTL in milliseconds. It deletes the entry only when it is in
// that state and owned by that token, then records the entry it deleted
// under the mark and publishes the key. A mark already there is this very
// purge's, resent by go-redis after the first send ran and lost its reply:
// it replies what the first send deleted, and changes nothing. Replies
// {verdict, d}, verdict 'purged', 'inflight' (in flight or abandoned, not
// asked for), 'changed' (completed where in flight was asked) or 'other'
// (another token's entry), or {'none'} or {'corrupt', t}. It runs past
// maxmemory: a purge frees memory (the mark holds the entry it deleted for
// the mark's TTL).
var purgeScript = newScript(allowOOM + `
local mark = redis.call('GET', KEYS[2])
if mark then return {'purged', cmsgpack.unpack(mark)} end
` + describeEntry + `
local verdict = 'purged'
if o ~= ARGV[2] then verdict = 'other'
elseif s ~= 'c' and ARGV[1] ~= 'i' then verdict = 'inflight'
elseif s == 'c' and ARGV[1] == 'i' then verdict = 'changed'
end
if verdict == 'purged' then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], cmsgpack.pack(d), 'PX', ARGV[5])
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return {verdict, d}
`)

// listScript: ARGV = SCAN cursor, MATCH pattern, COUNT, prefix length.
// One SCAN step; replies {next cursor, entry...}, each entry {key, 's',
// header, length, expiry, pttl} for a layout 2 string (header: the entry
// up to the end of its fingerprint, or of the Keep and attempt count of a
// kept entry, as far as it is well formed; length: STRLEN; pttl: PTTL)
// or {key, 'h', s, f, o, size, expiry} for a layout 1 hash (size: the key
// and its fields). Keys with a ':' after the prefix (another store's,
// under a longer prefix: see ownKey), keys of other types, and keys that
// expired meanwhile, are left out.
var listScript = newScript("#!lua flags=no-writes,allow-oom,allow-cross-slot-keys\n" + `
local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
local out = {r[1]}
for _, k in ipairs(r[2]) do
  local h = false
  if not string.find(k, ':', tonumber(ARGV[4]) + 1, true) then h = redis.pcall('GETRANGE', k, 0, 261) end
  if not h then
  elseif type(h) == 'table' then
    if redis.call('TYPE', k).ok == 'hash' then
      local f = redis.call('HMGET', k, 's', 'f', 'o')
      local size = #k
      for _, field in ipairs({'s', 'f', 'o', 'd'}) do size = size + redis.call('HSTRLEN', k, field) end
      out[#out + 1] = {k, 'h', f[1], f[2], f[3], size, redis.call('PEXPIRETIME', k)}
    end
  elseif #h > 0 then
    if #h >= 5 and string.byte(h, 1) == 2 then
      local tl = string.byte(h, 3)
      if #h >= 5 + tl then
        local hl = 5 + tl + string.byte(h, 4 + tl) * 256 + string.byte(h, 5 + tl)
        if string.byte(h, 2) == 107 then hl = hl + 12 end
        if hl > #h then h = redis.call('GETRANGE', k, 0, hl - 1) else h = string.sub(h, 1, hl) end
      end
    end
    out[#out + 1] = {k, 's', h, redis.call('STRLEN', k), redis.call('PEXPIRETIME', k), redis.call('PTTL', k)}
  end
end
return out
`)

// statsScript: ARGV = key prefix, sample size. It scans the master's keys
// from the start of its key space until it has examined the sample size
// or every key, and counts, among those under the prefix with no ':' after
// it (see ownKey), the entries and their bytes (key and value) by state
// (a kept entry is abandoned once its PTTL is down to its Keep). Replies
// {examined, whole (1 when the scan reached its end), DBSIZE, in-flight
// entries, their bytes, completed entries, their bytes, abandoned
// entries, their bytes}.
var statsScript = newScript("#!lua flags=no-writes,allow-oom,allow-cross-slot-keys\n" + `
local prefix, want = ARGV[1], tonumber(ARGV[2])
local cursor, examined = '0', 0
local n, b = {i = 0, c = 0, a = 0}, {i = 0, c = 0, a = 0}
repeat
  local r = redis.call('SCAN', cursor, 'COUNT', 100)
  cursor = r[1]
  for _, k in ipairs(r[2]) do
    examined = examined + 1
    if string.sub(k, 1, #prefix) == prefix and not string.find(k, ':', #prefix + 1, true) then
      local s, size = redis.pcall('GETRANGE', k, 1, 1), 0
      if type(s) == 'table' then
        if redis.call('TYPE', k).ok == 'hash' then
          s = redis.call('HGET', k, 's')
          size = #k
          for _, field in ipairs({'s', 'f', 'o', 'd'}) do size = size + redis.call('HSTRLEN', k, field) end
        end
      else
        size = #k + redis.call('STRLEN', k)
        if s == 'k' then
          local v, keep = redis.call('GET', k), 0
          if #v >= 17 then
            for i = #v - 11, #v - 4 do keep = keep * 256 + string.byte(v, i) end
            s = 'i'
            if redis.call('PTTL', k) <= keep then s = 'a' end
          end
        end
      end
      if s == 'i' or s == 'c' or s == 'a' then
        n[s] = n[s] + 1
        b[s] = b[s] + size
      end
    end
  end
until cursor == '0' or examined >= want
return {examined, cursor == '0' and 1 or 0, redis.call('DBSIZE'), n.i, b.i, n.c, b.c, n.a, b.a}
`)

// inspectScripts lists the scripts of this file, for [Store.LoadScripts].
var inspectScripts = []*script{lookupScript, purgeScript, listScript, statsScript}
