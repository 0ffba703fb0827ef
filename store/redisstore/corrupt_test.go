package redisstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/redistest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// TestCorruptValues writes values the store never writes under its keys
// and checks that Claim reports them as corrupt, without touching them.
func TestCorruptValues(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	st := redisstore.New(rdb)
	for _, tc := range []struct {
		name  string
		write func(p redis.Pipeliner, k string)
		msg   string // part of the error message
	}{
		{"String", func(p redis.Pipeliner, k string) { p.Set(t.Context(), k, "garbage", 0) }, `Redis "string"`},
		{"List", func(p redis.Pipeliner, k string) { p.RPush(t.Context(), k, "a") }, `Redis "list"`},
		{"Set", func(p redis.Pipeliner, k string) { p.SAdd(t.Context(), k, "a") }, `Redis "set"`},
		{"HashWithoutState", func(p redis.Pipeliner, k string) { p.HSet(t.Context(), k, "f", "x", "d", "y") }, "no state field"},
		{"HashUnknownState", func(p redis.Pipeliner, k string) { p.HSet(t.Context(), k, "s", "z", "f", "x") }, `unknown state "z"`},
		{"ForeignHash", func(p redis.Pipeliner, k string) { p.HSet(t.Context(), k, "name", "alice") }, "no state field"},
		{"CompletedWithoutData", func(p redis.Pipeliner, k string) { p.HSet(t.Context(), k, "s", "c", "f", "x") }, "no data field"},
		{"CompletedWithoutFingerprint", func(p redis.Pipeliner, k string) { p.HSet(t.Context(), k, "s", "c", "d", "x") }, "no fingerprint field"},
		{"InFlightWithoutFingerprint", func(p redis.Pipeliner, k string) { p.HSet(t.Context(), k, "s", "i", "o", "tok") }, "no fingerprint field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key := newKey(t)
			rkey := redisstore.DefaultPrefix + key
			if _, err := rdb.TxPipelined(t.Context(), func(p redis.Pipeliner) error {
				tc.write(p, rkey)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			before, err := rdb.Dump(t.Context(), rkey).Result()
			if err != nil {
				t.Fatal(err)
			}
			c, err := st.Claim(t.Context(), key, fp(), longTTL)
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("Claim = %+v, %v; want an error matching store.ErrCorrupt", c, err)
			}
			if !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), rkey) {
				t.Errorf("Claim error %q does not name the key %q and say %q", err, rkey, tc.msg)
			}
			if after, _ := rdb.Dump(t.Context(), rkey).Result(); after != before {
				t.Error("Claim changed the corrupt value")
			}
		})
	}
}

// TestFencedOnForeignType checks that Complete, Release and Extend on a
// key holding another Redis type refuse (lease lost) and say it is corrupt,
// leaving the value alone.
func TestFencedOnForeignType(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	st := redisstore.New(rdb)
	key := newKey(t)
	rkey := redisstore.DefaultPrefix + key
	if err := rdb.Set(t.Context(), rkey, "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for op, err := range map[string]error{
		"Complete": st.Complete(t.Context(), key, "tok", []byte("x"), longTTL),
		"Release":  st.Release(t.Context(), key, "tok"),
		"Extend":   st.Extend(t.Context(), key, "tok", longTTL),
	} {
		if !errors.Is(err, store.ErrLeaseLost) || !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s = %v; want an error matching store.ErrLeaseLost and store.ErrCorrupt", op, err)
		}
	}
	if got, err := rdb.Get(t.Context(), rkey).Result(); err != nil || got != "garbage" {
		t.Fatalf("value after the refused calls = %q, %v; want garbage", got, err)
	}
}
