package redisstore_test

import (
	"errors"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

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

func FuzzDecodeClaimReply(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint8(0), "new", "", []byte(nil), []byte(nil))
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
		c, err := redisstore.DecodeClaimReply(r, "token")
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("DecodeClaimReply(%#v) = %v, which does not match store.ErrCorrupt", r, err)
			}
			if c.Won() || c.Existing.State != 0 {
				t.Fatalf("DecodeClaimReply(%#v) returned %+v with error %v", r, c, err)
			}
			return
		}
		if c.Won() {
			if c.Token != "token" || c.Existing.State != 0 || c.Existing.Fingerprint != nil || c.Existing.Data != nil {
				t.Fatalf("DecodeClaimReply(%#v) won with %+v", r, c)
			}
			return
		}
		e := c.Existing
		switch {
		case e.Fingerprint == nil:
			t.Fatalf("DecodeClaimReply(%#v): entry without fingerprint %+v", r, e)
		case e.State == store.StateInFlight && e.Data != nil:
			t.Fatalf("DecodeClaimReply(%#v): in-flight entry with data %+v", r, e)
		case e.State == store.StateCompleted && e.Data == nil:
			t.Fatalf("DecodeClaimReply(%#v): completed entry without data %+v", r, e)
		case e.State != store.StateInFlight && e.State != store.StateCompleted:
			t.Fatalf("DecodeClaimReply(%#v): entry in state %v", r, e.State)
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
