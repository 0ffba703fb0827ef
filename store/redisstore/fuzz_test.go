package redisstore_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// FuzzDecodeValue reads arbitrary bytes as a layout 2 entry: nothing
// panics, anything unreadable is corrupt, and whatever reads back is a
// well-formed entry that encodes to the same bytes.
func FuzzDecodeValue(f *testing.F) {
	inFlight := redisstore.EncodeInFlight("abcdefghijklmnopqrstuv", []byte("fingerprint"))
	completed := append([]byte{2, 'c'}, inFlight[2:]...)
	f.Add(inFlight)
	f.Add(append(completed, "data"...))
	f.Add(completed)
	f.Add(append(bytes.Clone(inFlight), 'x'))
	f.Add(inFlight[:len(inFlight)-1])
	f.Add([]byte{2, 'i', 0, 0, 0})
	f.Add([]byte{2, 'z', 0, 0, 0})
	f.Add([]byte{2, 'i', 255, 0, 0})
	f.Add([]byte{2, 'c', 0, 255, 255, 'x'})
	f.Add([]byte{1, 'i', 0, 0, 0})
	f.Add([]byte("garbage"))
	f.Add([]byte{})
	kept := redisstore.EncodeKept("abcdefghijklmnopqrstuv", []byte("fingerprint"), 60000, 3)
	f.Add(kept)
	f.Add(kept[:len(kept)-1])
	f.Add(append(bytes.Clone(kept), 'x'))
	f.Add(redisstore.EncodeKept("t", nil, 0, 1))
	f.Add(redisstore.EncodeKept("t", nil, 1, 0))
	f.Fuzz(func(t *testing.T, v []byte) {
		e, token, err := redisstore.DecodeValue(string(v))
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("DecodeValue(%q) = %v, which does not match store.ErrCorrupt", v, err)
			}
			if e.State != 0 || token != "" {
				t.Fatalf("DecodeValue(%q) returned %+v, %q with error %v", v, e, token, err)
			}
			return
		}
		header := redisstore.EncodeInFlight(token, e.Fingerprint)
		switch e.State {
		case store.StateInFlight:
			if len(v) > 1 && v[1] == 'k' {
				_, _, keep, attempt, _ := redisstore.DecodeKept(string(v))
				if k := redisstore.EncodeKept(token, e.Fingerprint, keep, uint32(attempt)); e.Data != nil || keep <= 0 || attempt <= 0 || !bytes.Equal(k, v) {
					t.Fatalf("DecodeValue(%q) = kept %+v, token %q, keep %d, attempt %d, which encodes to %q", v, e, token, keep, attempt, k)
				}
				return
			}
			if e.Data != nil || !bytes.Equal(header, v) {
				t.Fatalf("DecodeValue(%q) = in flight %+v, token %q, which encodes to %q", v, e, token, header)
			}
		case store.StateCompleted:
			header[1] = 'c'
			if e.Data == nil || !bytes.Equal(append(header, e.Data...), v) {
				t.Fatalf("DecodeValue(%q) = completed %+v, token %q, which encodes otherwise", v, e, token)
			}
		default:
			t.Fatalf("DecodeValue(%q): entry in state %v", v, e.State)
		}
	})
}

// FuzzEncodeInFlight checks that every claim the layout holds reads back
// as written.
func FuzzEncodeInFlight(f *testing.F) {
	f.Add("abcdefghijklmnopqrstuv", []byte("fingerprint"))
	f.Add("", []byte(nil))
	f.Add("t", bytes.Repeat([]byte{0xff}, 300))
	f.Fuzz(func(t *testing.T, token string, fingerprint []byte) {
		if len(token) > 255 || len(fingerprint) > 65535 {
			t.Skip("beyond what the layout holds; Claim refuses such a fingerprint, and tokens are 22 bytes")
		}
		e, got, err := redisstore.DecodeValue(string(redisstore.EncodeInFlight(token, fingerprint)))
		if err != nil || got != token || e.State != store.StateInFlight || !bytes.Equal(e.Fingerprint, fingerprint) || e.Data != nil {
			t.Fatalf("EncodeInFlight(%q, %q) reads back as %+v, %q, %v", token, fingerprint, e, got, err)
		}
	})
}

// reply builds a script reply as go-redis hands it over: shape 0 is an
// array of the first n of (tag, s, f, d, an integer) with the elements
// whose bit is set in nils replaced by nil; shapes 1, 2 and 3 are a bare
// string, integer and nil.
func reply(shape, n, nils uint8, tag, s string, f, d []byte) any {
	switch shape % 4 {
	case 1:
		return tag
	case 2:
		return int64(n)
	case 3:
		return nil
	}
	elems := []any{tag, s, string(f), string(d), int64(len(d))}
	elems = elems[:int(n)%(len(elems)+1)]
	for i := range elems {
		if nils&(1<<i) != 0 {
			elems[i] = nil
		}
	}
	return elems
}

func FuzzDecodeLegacyClaimReply(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint8(0), "new", "", []byte(nil), []byte(nil))
	f.Add(uint8(0), uint8(2), uint8(0), "value", "\x02i\x00\x00\x00", []byte(nil), []byte(nil))
	f.Add(uint8(0), uint8(2), uint8(1<<1), "value", "", []byte(nil), []byte(nil))
	f.Add(uint8(0), uint8(2), uint8(0), "type", "string", []byte(nil), []byte(nil))
	f.Add(uint8(0), uint8(4), uint8(0), "hit", "i", []byte("fp"), []byte(nil))
	f.Add(uint8(0), uint8(4), uint8(1<<3), "hit", "i", []byte("fp"), []byte(nil))
	f.Add(uint8(0), uint8(4), uint8(0), "hit", "c", []byte("fp"), []byte("data"))
	f.Add(uint8(0), uint8(4), uint8(1<<3), "hit", "c", []byte("fp"), []byte(nil))
	f.Add(uint8(0), uint8(4), uint8(1<<2), "hit", "c", []byte(nil), []byte("data"))
	f.Add(uint8(0), uint8(4), uint8(1<<1), "hit", "", []byte("fp"), []byte("data"))
	f.Add(uint8(0), uint8(4), uint8(0), "hit", "z", []byte{0, 0xff}, []byte{})
	f.Add(uint8(0), uint8(5), uint8(0), "hit", "c", []byte("fp"), []byte("data"))
	f.Add(uint8(0), uint8(0), uint8(0), "", "", []byte(nil), []byte(nil))
	f.Add(uint8(1), uint8(0), uint8(0), "new", "", []byte(nil), []byte(nil))
	f.Add(uint8(2), uint8(1), uint8(0), "", "", []byte(nil), []byte(nil))
	f.Add(uint8(3), uint8(0), uint8(0), "", "", []byte(nil), []byte(nil))
	f.Fuzz(func(t *testing.T, shape, n, nils uint8, tag, s string, fingerprint, data []byte) {
		r := reply(shape, n, nils, tag, s, fingerprint, data)
		c, err := redisstore.DecodeLegacyClaimReply(r)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("DecodeLegacyClaimReply(%#v) = %v, which does not match store.ErrCorrupt", r, err)
			}
			if c.Won() || c.Found() || c.Entry().State != 0 {
				t.Fatalf("DecodeLegacyClaimReply(%#v) returned %+v with error %v", r, c, err)
			}
			return
		}
		if c.Won() || c.Found() {
			if (c.Won() && c.Found()) || c.Entry().State != 0 || (!c.Found() && c.Value() != "") {
				t.Fatalf("DecodeLegacyClaimReply(%#v) = %+v: more than one answer", r, c)
			}
			return
		}
		e := c.Entry()
		switch {
		case e.Fingerprint == nil:
			t.Fatalf("DecodeLegacyClaimReply(%#v): entry without fingerprint %+v", r, e)
		case e.State == store.StateInFlight && e.Data != nil:
			t.Fatalf("DecodeLegacyClaimReply(%#v): in-flight entry with data %+v", r, e)
		case e.State == store.StateCompleted && e.Data == nil:
			t.Fatalf("DecodeLegacyClaimReply(%#v): completed entry without data %+v", r, e)
		case e.State != store.StateInFlight && e.State != store.StateCompleted:
			t.Fatalf("DecodeLegacyClaimReply(%#v): entry in state %v", r, e.State)
		}
	})
}

func FuzzDecodeFencedReply(f *testing.F) {
	f.Add(uint8(2), uint8(1), "")
	f.Add(uint8(2), uint8(0), "")
	f.Add(uint8(2), uint8(7), "")
	f.Add(uint8(1), uint8(0), "string")
	f.Add(uint8(3), uint8(0), "")
	f.Add(uint8(0), uint8(2), "x")
	f.Fuzz(func(t *testing.T, shape, n uint8, s string) {
		r := reply(shape, n, 0, s, s, nil, nil)
		err := redisstore.DecodeFencedReply(r)
		ok := r == int64(1)
		switch {
		case ok && err != nil:
			t.Fatalf("DecodeFencedReply(%#v) = %v, want nil", r, err)
		case !ok && err == nil:
			t.Fatalf("DecodeFencedReply(%#v) = nil, want an error", r)
		case !ok && !errors.Is(err, store.ErrLeaseLost) && !errors.Is(err, store.ErrCorrupt):
			t.Fatalf("DecodeFencedReply(%#v) = %v, want ErrLeaseLost or ErrCorrupt", r, err)
		}
	})
}

// FuzzDecodeListEntry reads arbitrary bytes as the header of an entry that
// the list script found: nothing panics, and what reads back is the entry
// DecodeValue reads from those bytes, without data, under its key.
func FuzzDecodeListEntry(f *testing.F) {
	inFlight := redisstore.EncodeInFlight(store.NewToken(), []byte("fingerprint"))
	kept := redisstore.EncodeKept(store.NewToken(), []byte("fingerprint"), 1000, 2)
	f.Add("k", inFlight, int64(len(inFlight)), int64(1), int64(1))
	f.Add("k", append([]byte{2, 'c'}, inFlight[2:]...), int64(len(inFlight)+100), int64(-1), int64(-1))
	f.Add("", []byte{2, 'i', 0, 0, 0}, int64(5), int64(0), int64(0))
	f.Add("k", []byte("garbage"), int64(7), int64(1), int64(1))
	f.Add("k", kept, int64(len(kept)), int64(5000), int64(2000))
	f.Add("k", kept, int64(len(kept)), int64(5000), int64(1000))
	f.Fuzz(func(t *testing.T, key string, header []byte, length, expiry, pttl int64) {
		const prefix = "p:"
		info, ok := redisstore.DecodeListEntry(prefix, []any{prefix + key, "s", string(header), length, expiry, pttl})
		e, token, keep, attempt, err := redisstore.DecodeKept(string(header))
		if strings.Contains(key, ":") {
			// Another store's key, under a longer prefix.
			if ok {
				t.Fatalf("DecodeListEntry of key %q with a ':' = %+v, want it left out", key, info)
			}
			return
		}
		if ok != (err == nil) {
			t.Fatalf("DecodeListEntry ok=%v, DecodeValue err=%v", ok, err)
		}
		if !ok {
			return
		}
		if keep > 0 && pttl <= keep {
			e.State = store.StateAbandoned
		}
		if info.Key != key || info.State != e.State || info.Token != token || info.Attempt != attempt || !bytes.Equal(info.Fingerprint, e.Fingerprint) || info.Data != nil {
			t.Fatalf("DecodeListEntry = %+v; DecodeValue = %+v, token %q, keep %d, attempt %d", info, e, token, keep, attempt)
		}
		if at, _ := store.TokenTime(token); !info.Claimed.Equal(at) {
			t.Fatalf("Claimed = %v, TokenTime = %v", info.Claimed, at)
		}
	})
}

// FuzzDecodeKeptClaimReply reads arbitrary replies of the kept claim
// script, {tag, s, n} cut to its first count elements: nothing panics,
// anything unreadable is corrupt, a take-over is of attempt 2 or more, and
// an entry in flight, abandoned or found under the claim's own token is a
// kept one.
func FuzzDecodeKeptClaimReply(f *testing.F) {
	kept := string(redisstore.EncodeKept(store.NewToken(), []byte("fingerprint"), 1000, 2))
	inFlight := string(redisstore.EncodeInFlight(store.NewToken(), []byte("fingerprint")))
	for _, tag := range []string{"new", "other", "took", "mine", "inflight", "abandoned", "value", ""} {
		f.Add(uint8(1), tag, kept, int64(2))
		f.Add(uint8(2), tag, kept, int64(2))
		f.Add(uint8(3), tag, inFlight, int64(1))
	}
	f.Add(uint8(3), "took", store.NewToken(), int64(3))
	f.Add(uint8(3), "took", store.NewToken(), int64(1))
	f.Fuzz(func(t *testing.T, count uint8, tag, s string, n int64) {
		r := []any{tag, s, n}[:int(count)%4]
		gotTag, attempt, keep, err := redisstore.DecodeKeptClaimReply(r)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("DecodeKeptClaimReply(%#v) = %v, which does not match store.ErrCorrupt", r, err)
			}
			return
		}
		switch gotTag {
		case "new", "other", "value":
		case "took":
			if attempt < 2 {
				t.Fatalf("DecodeKeptClaimReply(%#v): take-over as attempt %d", r, attempt)
			}
		case "mine", "inflight", "abandoned":
			if keep <= 0 {
				t.Fatalf("DecodeKeptClaimReply(%#v): %s entry that is not kept", r, gotTag)
			}
		default:
			t.Fatalf("DecodeKeptClaimReply(%#v): tag %q", r, gotTag)
		}
	})
}
