package redisstore

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
)

// decodeVerdict reads a reply of lookupScript or purgeScript for key
// (under prefix):
// its verdict and the entry it describes, [store.ErrNotFound] for
// {'none'}, and an error wrapping [store.ErrCorrupt] for anything that is
// not an entry.
func decodeVerdict(prefix, key string, reply any) (string, store.Info, error) {
	arr, ok := reply.([]any)
	if !ok || len(arr) == 0 {
		return "", store.Info{}, corrupt("unexpected reply %s", describe(reply))
	}
	verdict, _ := arr[0].(string)
	switch {
	case verdict == "none" && len(arr) == 1:
		return verdict, store.Info{}, store.ErrNotFound
	case verdict == "corrupt" && len(arr) == 2:
		t, _ := arr[1].(string)
		return verdict, store.Info{}, corrupt("key holds a Redis %q that is not an idempotency entry", t)
	case len(arr) != 2:
		return verdict, store.Info{}, corrupt("unexpected reply %s", describe(reply))
	}
	info, err := decodeDescription(prefix, key, arr[1])
	return verdict, info, err
}

// decodeDescription reads the d of describeEntry: {'s', value, expiry,
// pttl} or {'h', s, f, o, d, expiry}.
func decodeDescription(prefix, key string, d any) (store.Info, error) {
	arr, _ := d.([]any)
	switch {
	case len(arr) == 4 && arr[0] == "s":
		v, ok1 := arr[1].(string)
		exp, ok2 := arr[2].(int64)
		pttl, ok3 := arr[3].(int64)
		if ok1 && ok2 && ok3 {
			return decodeString(prefix, key, v, int64(len(v)), exp, pttl, true)
		}
	case len(arr) == 6 && arr[0] == "h":
		exp, ok := arr[5].(int64)
		if ok {
			return decodeHash(prefix, key, arr[1], arr[2], arr[3], arr[4], -1, exp)
		}
	}
	return store.Info{}, corrupt("unexpected entry description %s", describe(d))
}

// decodeString describes key, whose value v (the whole value, or its
// header with length the whole value's length) expires at exp (Unix
// milliseconds) and has pttl milliseconds left, with the value's data when
// withData is set. A kept entry is abandoned when pttl is down to its
// Keep; while in flight, it Expires at the end of its lease, its Keep
// before the key's expiry.
func decodeString(prefix, key, v string, length, exp, pttl int64, withData bool) (store.Info, error) {
	d, err := decodeEntry(v)
	if err != nil {
		return store.Info{}, err
	}
	e, token := d.entry, d.token
	info := store.Info{
		Key:         key,
		State:       d.state(pttl),
		Token:       strings.Clone(token),
		Fingerprint: bytes.Clone(e.Fingerprint),
		Size:        int64(len(prefix)+len(key)) + length,
		Expires:     expiry(exp),
		Attempt:     d.attempt,
	}
	if info.State == store.StateInFlight && d.kept() && exp >= 0 {
		info.Expires = expiry(exp - d.keep)
	}
	if withData && e.State == store.StateCompleted {
		info.Data = bytes.Clone(e.Data)
	}
	info.Claimed, _ = store.TokenTime(token)
	return info, nil
}

// decodeHash describes key, a layout 1 hash with fields s, f, o and d
// (nil when missing; d is not read when size is set, as in a listing) of
// size bytes (-1: the lengths of the key and the fields), expiring at exp.
func decodeHash(prefix, key string, st, f, o, d any, size, exp int64) (store.Info, error) {
	withData := size < 0
	if !withData {
		d = ""
	}
	e, err := decodeHashEntry(st, f, d)
	if err != nil {
		return store.Info{}, err
	}
	token, ok := o.(string)
	if !ok {
		return store.Info{}, corrupt("entry has no owner field %q (got %s)", "o", describe(o))
	}
	if withData {
		size = int64(len(prefix) + len(key) + 1 + len(e.Fingerprint) + len(token) + len(e.Data))
	}
	info := store.Info{
		Key:         key,
		State:       e.State,
		Token:       token,
		Attempt:     attemptOfHash(e.State),
		Fingerprint: e.Fingerprint,
		Size:        size,
		Expires:     expiry(exp),
	}
	if withData {
		info.Data = e.Data
	}
	info.Claimed, _ = store.TokenTime(token)
	return info, nil
}

// attemptOfHash is the attempt count of a layout 1 entry in state st: 1
// in flight (it has no Keep, so it was never taken over), unknown (0)
// once completed.
func attemptOfHash(st store.State) int {
	if st == store.StateInFlight {
		return 1
	}
	return 0
}

// expiry returns the time of a PEXPIRETIME: the zero Time for a key with
// no expiry (-1), which this store never writes.
func expiry(ms int64) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// decodeListReply reads a reply of listScript: SCAN's next cursor and the
// entries under the store's prefix, without their data. A value that is
// not a well-formed entry is left out, as a key of another type is.
func decodeListReply(prefix string, reply any) (uint64, []store.Info, error) {
	arr, ok := reply.([]any)
	if !ok || len(arr) == 0 {
		return 0, nil, corrupt("unexpected list reply %s", describe(reply))
	}
	c, _ := arr[0].(string)
	next, err := strconv.ParseUint(c, 10, 64)
	if err != nil {
		return 0, nil, corrupt("unexpected list reply cursor %s", describe(arr[0]))
	}
	var infos []store.Info
	for _, item := range arr[1:] {
		if info, ok := decodeListEntry(prefix, item); ok {
			infos = append(infos, info)
		}
	}
	return next, infos, nil
}

// decodeListEntry reads one entry of a list reply: {key, 's', header,
// length, expiry, pttl} or {key, 'h', s, f, o, size, expiry}. It reports false
// for anything else, and for a key that is not the store's (ownKey).
func decodeListEntry(prefix string, item any) (store.Info, bool) {
	e, _ := item.([]any)
	if len(e) < 2 {
		return store.Info{}, false
	}
	rkey, _ := e[0].(string)
	key, ok := ownKey(prefix, rkey)
	if !ok {
		return store.Info{}, false
	}
	var (
		info store.Info
		err  error
	)
	switch {
	case len(e) == 6 && e[1] == "s":
		h, ok1 := e[2].(string)
		length, ok2 := e[3].(int64)
		exp, ok3 := e[4].(int64)
		pttl, ok4 := e[5].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return store.Info{}, false
		}
		info, err = decodeString(prefix, key, h, length, exp, pttl, false)
	case len(e) == 7 && e[1] == "h":
		size, ok1 := e[5].(int64)
		exp, ok2 := e[6].(int64)
		if !ok1 || !ok2 {
			return store.Info{}, false
		}
		info, err = decodeHash(prefix, key, e[2], e[3], e[4], nil, size, exp)
	default:
		return store.Info{}, false
	}
	return info, err == nil
}

// ownKey returns the store key of rkey, a Redis key, and whether it is
// one of this store's: rkey starts with prefix, and the rest holds no ':'.
// The store keys the server derives are unpadded base64url, which has no
// ':', and Redis prefixes are written with ':' between their parts, so a
// key with a ':' after the prefix belongs to a store whose prefix extends
// this one (prefix+"orders:"), and List and Stats leave it out.
func ownKey(prefix, rkey string) (string, bool) {
	key, ok := strings.CutPrefix(rkey, prefix)
	return key, ok && !strings.Contains(key, ":")
}
