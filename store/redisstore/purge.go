package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// Purge implements [store.Inspector.Purge] with one script on the key,
// which checks the entry's state and owner token, deletes it, records it
// under a mark of this purge's own, and publishes the key for
// [Store.Invalidations], all in one atomic step: one round trip with
// opts.Token, two without. It runs past maxmemory, as the steps of a
// granted claim do. A value under the key that is not an entry is not
// purged: Purge returns an error wrapping [store.ErrCorrupt], and the
// value stays.
//
// Every script a purge sends is fenced by an owner token, so that go-redis
// may resend it (MaxRetries) without harm. Without opts.Token, Purge first
// looks the entry up (the script of [Store.Lookup]); an entry in a state
// opts does not purge is refused there, and any other is purged fenced by
// its token. When another claim's entry has replaced it meanwhile, Purge
// purges that one in turn, fenced by its own token, as a purge without a
// token must (at most 8 times; then it fails, having purged nothing). A
// resend whose first send ran finds that send's mark, in the key's hash
// slot, and answers what it purged: it deletes nothing, and in particular
// not an entry claimed since the first send ran. The mark holds the
// purged entry for a minute (see purgeMarkTTL).
func (s *Store) Purge(ctx context.Context, key string, opts store.PurgeOptions) (store.Info, error) {
	rkey := s.prefix + key
	info, err := s.purge(ctx, key, rkey, opts)
	if err != nil {
		return info, fmt.Errorf("redisstore: purge %q: %w", rkey, err)
	}
	return info, nil
}

// purgeMarkTTL is how long the mark of a purge lives in Redis. A reply of
// the purge script that took half of it or more may come from a resend
// that ran once the first send's mark was gone, so Purge cannot tell from
// it whether the first send purged: it reports the outcome as unknown
// instead of a refusal or a key found empty (go-redis's resends are
// bounded by its timeouts, 3 s a read by default, far below).
const purgeMarkTTL = time.Minute

// purgeRounds bounds the purges of one Purge without a token, each fenced
// by the token of the entry the one before found.
const purgeRounds = 8

// purge is Purge, its errors not yet wrapped with the key.
func (s *Store) purge(ctx context.Context, key, rkey string, opts store.PurgeOptions) (store.Info, error) {
	state := string(stateCompleted)
	if opts.InFlight {
		state = string(stateInFlight)
	}
	token := opts.Token
	if token == "" {
		reply, err := s.eval(ctx, s.rdb, lookupScript, []string{rkey}, "")
		if err != nil {
			return store.Info{}, err
		}
		_, found, err := decodeVerdict(s.prefix, key, reply)
		switch {
		case err != nil:
			return store.Info{}, err
		case !opts.InFlight && found.State != store.StateCompleted:
			return found, store.ErrInFlight
		case opts.InFlight && found.State == store.StateCompleted:
			return found, store.ErrChanged
		}
		token = found.Token
	}
	for range purgeRounds {
		start := time.Now()
		keys := []string{rkey, markKey(s.prefix, rkey, store.NewToken())}
		reply, err := s.eval(ctx, s.rdb, purgeScript, keys, state, token, s.channel(), key, s.markTTL.Milliseconds())
		if err != nil {
			return store.Info{}, err
		}
		verdict, info, err := decodeVerdict(s.prefix, key, reply)
		switch {
		case (verdict == "none" || verdict == "other") && time.Since(start) >= s.markTTL/2:
			return store.Info{}, fmt.Errorf("its reply took %v, longer than its mark is sure to live: whether it purged is unknown", time.Since(start).Round(time.Millisecond))
		case err != nil:
			return info, err
		case verdict == "purged":
			return info, nil
		case verdict == "inflight":
			return info, store.ErrInFlight
		case verdict == "changed":
			return info, store.ErrChanged
		case verdict != "other":
			return info, corrupt("unexpected purge verdict %q", verdict)
		case opts.Token != "":
			return info, store.ErrChanged
		}
		// The entry of another claim, made since the last look: no send
		// of this round purged (its mark would have said so). Purge that
		// entry, fenced by its own token.
		token = info.Token
	}
	return store.Info{}, fmt.Errorf("the key was claimed anew %d times while it was being purged; nothing was purged", purgeRounds)
}

// markKey returns the key of the mark of one purge of rkey, a key of the
// store whose prefix is prefix, named by the purge's nonce:
// prefix+"{tag}:purge:"+nonce, tag chosen so that the mark is in rkey's
// hash slot and the purge script may touch both keys on a Redis Cluster.
// It stays under the prefix, so that an ACL that limits the store's user to
// its prefix (~prefix*) lets it write the mark, and the ':' after the
// prefix keeps it out of [Store.List] and [Store.Stats] (see ownKey).
func markKey(prefix, rkey, nonce string) string {
	slot := hashSlot(rkey)
	mark := prefix + "{" + slotTag(rkey) + "}:purge:" + nonce
	// A prefix with a '{' of its own may take the tag over: try numbers
	// as the tag until the mark's slot is rkey's.
	for n := 0; hashSlot(mark) != slot && n < 1<<24; n++ {
		mark = prefix + "{" + strconv.Itoa(n) + "}:purge:" + nonce
	}
	return mark
}

// hashSlot returns the hash slot of a Redis key, as Redis Cluster computes
// it: the CRC16 of its hash tag (the text between its first '{' and the
// first '}' after it, when not empty), or of the whole key.
func hashSlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % clusterSlots
}

// slotTag returns a string that, as a hash tag, puts a key in rkey's hash
// slot: the part of rkey that Redis Cluster hashes, when it holds no '}'
// (which would end the tag), or else the first decimal number whose hash
// slot is rkey's.
func slotTag(rkey string) string {
	if i := strings.IndexByte(rkey, '{'); i >= 0 {
		if j := strings.IndexByte(rkey[i+1:], '}'); j > 0 {
			return rkey[i+1 : i+1+j]
		}
	}
	if rkey != "" && !strings.Contains(rkey, "}") {
		return rkey
	}
	slot := hashSlot(rkey)
	for n := 0; ; n++ {
		if tag := strconv.Itoa(n); crc16(tag)%clusterSlots == slot {
			return tag
		}
	}
}

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// crc16 is the CRC16 of Redis Cluster's key hash (XMODEM: polynomial
// 0x1021, initial value 0).
func crc16(s string) uint16 {
	var crc uint16
	for i := range len(s) {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
