package redisstore_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// writeLayout1 writes an entry as the release before layout 2 did: a hash
// with s, f, o (and d once completed), with a TTL.
func writeLayout1(t *testing.T, rdb redis.Cmdable, rkey, state, token string, fingerprint, data []byte) {
	t.Helper()
	fields := []any{"s", state, "f", fingerprint, "o", token}
	if data != nil {
		fields = append(fields, "d", data)
	}
	if err := rdb.HSet(t.Context(), rkey, fields...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.PExpire(t.Context(), rkey, longTTL).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestLayout1 checks that entries of the earlier layout, a hash, are read
// and settled for as long as they live: a claim of such a key answers its
// entry (SET answers WRONGTYPE, then the legacy claim script reads the
// hash: one more round trip), and the fenced steps of its owner work on it
// in place.
func TestLayout1(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	st := redisstore.New(rdb)
	if err := st.LoadScripts(t.Context()); err != nil {
		t.Fatal(err)
	}
	var rt redistest.RoundTrips
	rdb.AddHook(&rt)
	const token = "layout1-owner-token-22"
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, key, rkey string, fingerprint []byte)
	}{
		{"ReplayOfCompleted", func(t *testing.T, key, rkey string, fingerprint []byte) {
			writeLayout1(t, rdb, rkey, "c", token, fingerprint, []byte("stored"))
			rt.Reset()
			c, err := st.Claim(t.Context(), key, fp(), longTTL, store.ClaimOptions{})
			if err != nil || c.Won() || c.Existing.State != store.StateCompleted ||
				!bytes.Equal(c.Existing.Fingerprint, fingerprint) || string(c.Existing.Data) != "stored" {
				t.Fatalf("Claim of a completed layout 1 entry = %+v, %v", c, err)
			}
			if got, want := rt.Commands(), []string{"set", "evalsha"}; !slices.Equal(got, want) {
				t.Errorf("the claim sent %q, want %q", got, want)
			}
			if err := st.Complete(t.Context(), key, token, []byte("again"), longTTL); err != nil {
				t.Errorf("Complete resent by its owner = %v, want nil", err)
			}
			if err := st.Release(t.Context(), key, token); !errors.Is(err, store.ErrLeaseLost) {
				t.Errorf("Release of a completed entry = %v, want ErrLeaseLost", err)
			}
			if got := rdb.HGet(t.Context(), rkey, "d").Val(); got != "stored" {
				t.Errorf("data after the refused steps = %q, want stored", got)
			}
		}},
		{"InFlightCompletedByItsOwner", func(t *testing.T, key, rkey string, fingerprint []byte) {
			writeLayout1(t, rdb, rkey, "i", token, fingerprint, nil)
			c, err := st.Claim(t.Context(), key, fp(), longTTL, store.ClaimOptions{})
			if err != nil || c.Won() || c.Existing.State != store.StateInFlight || !bytes.Equal(c.Existing.Fingerprint, fingerprint) {
				t.Fatalf("Claim of an in-flight layout 1 entry = %+v, %v", c, err)
			}
			if err := st.Extend(t.Context(), key, "another-token", 2*longTTL); !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("Extend by another token = %v, want ErrLeaseLost", err)
			}
			if err := st.Extend(t.Context(), key, token, 2*longTTL); err != nil {
				t.Fatalf("Extend by its owner: %v", err)
			}
			if pttl := rdb.PTTL(t.Context(), rkey).Val(); pttl <= longTTL {
				t.Fatalf("PTTL after Extend = %v", pttl)
			}
			if err := st.Complete(t.Context(), key, token, []byte("done"), time.Hour); err != nil {
				t.Fatalf("Complete by its owner: %v", err)
			}
			c, err = st.Claim(t.Context(), key, fp(), longTTL, store.ClaimOptions{})
			if err != nil || c.Won() || c.Existing.State != store.StateCompleted || string(c.Existing.Data) != "done" {
				t.Fatalf("Claim after the completion = %+v, %v", c, err)
			}
			if typ := rdb.Type(t.Context(), rkey).Val(); typ != "hash" {
				t.Fatalf("the completed entry is a %s, want it completed in place, a hash", typ)
			}
		}},
		{"InFlightReleasedThenClaimedAnew", func(t *testing.T, key, rkey string, fingerprint []byte) {
			writeLayout1(t, rdb, rkey, "i", token, fingerprint, nil)
			if err := st.Release(t.Context(), key, "another-token"); !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("Release by another token = %v, want ErrLeaseLost", err)
			}
			if err := st.Release(t.Context(), key, token); err != nil {
				t.Fatalf("Release by its owner: %v", err)
			}
			c, err := st.Claim(t.Context(), key, fingerprint, longTTL, store.ClaimOptions{})
			if err != nil || !c.Won() {
				t.Fatalf("Claim after the release = %+v, %v; want a win", c, err)
			}
			if typ := rdb.Type(t.Context(), rkey).Val(); typ != "string" {
				t.Fatalf("the new claim is a %s, want layout 2, a string", typ)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Not parallel: the round trips of one case are counted.
			key := newKey(t)
			tc.run(t, key, redisstore.DefaultPrefix+key, fp())
		})
	}
}
