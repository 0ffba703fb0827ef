package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
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
		{"String", func(p redis.Pipeliner, k string) { p.Set(t.Context(), k, "garbage", 0) }, "Redis string that is not an idempotency entry"},
		{"EmptyString", func(p redis.Pipeliner, k string) { p.Set(t.Context(), k, "", 0) }, "Redis string that is not an idempotency entry"},
		{"OtherVersion", func(p redis.Pipeliner, k string) { p.Set(t.Context(), k, "\x03i\x00\x00\x00", 0) }, "first byte 0x3"},
		{"TruncatedToken", func(p redis.Pipeliner, k string) { p.Set(t.Context(), k, "\x02i\x16abc", 0) }, "shorter than its 22-byte token"},
		{"TruncatedFingerprint", func(p redis.Pipeliner, k string) { p.Set(t.Context(), k, "\x02i\x00\x00\x09abc", 0) }, "shorter than its 9-byte fingerprint"},
		{"InFlightWithData", func(p redis.Pipeliner, k string) { p.Set(t.Context(), k, "\x02i\x00\x00\x01fx", 0) }, "1 bytes after its fingerprint"},
		{"UnknownState", func(p redis.Pipeliner, k string) { p.Set(t.Context(), k, "\x02z\x00\x00\x00", 0) }, "unknown state 0x7a"},
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
			c, err := st.Claim(t.Context(), key, fp(), longTTL, store.ClaimOptions{})
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

// TestFencedOnForeignValue checks that Complete, Release and Extend on a
// key holding a value that is not an entry (another Redis type, or a
// string that is not a well-formed entry, even one that carries the
// caller's token) refuse (lease lost) and say it is corrupt, leaving the
// value alone.
func TestFencedOnForeignValue(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	st := redisstore.New(rdb)
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, k string) error
	}{
		{"String", func(ctx context.Context, k string) error { return rdb.Set(ctx, k, "garbage", 0).Err() }},
		{"List", func(ctx context.Context, k string) error { return rdb.RPush(ctx, k, "a").Err() }},
		{"InFlightWithData", func(ctx context.Context, k string) error {
			return rdb.Set(ctx, k, "\x02i\x03tok\x00\x01fx", 0).Err()
		}},
		{"TruncatedFingerprint", func(ctx context.Context, k string) error {
			return rdb.Set(ctx, k, "\x02i\x03tok\x00\x09f", 0).Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			key := newKey(t)
			rkey := redisstore.DefaultPrefix + key
			if err := tc.write(ctx, rkey); err != nil {
				t.Fatal(err)
			}
			before, err := rdb.Dump(ctx, rkey).Result()
			if err != nil {
				t.Fatal(err)
			}
			for op, err := range map[string]error{
				"Complete": st.Complete(ctx, key, "tok", []byte("x"), longTTL),
				"Release":  st.Release(ctx, key, "tok"),
				"Extend":   st.Extend(ctx, key, "tok", longTTL),
			} {
				if !errors.Is(err, store.ErrLeaseLost) || !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("%s = %v; want an error matching store.ErrLeaseLost and store.ErrCorrupt", op, err)
				}
			}
			if after, _ := rdb.Dump(ctx, rkey).Result(); after != before {
				t.Fatal("the refused calls changed the value")
			}
		})
	}
}
