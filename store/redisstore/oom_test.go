package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestOutOfMemory checks the store on a Redis at maxmemory with
// noeviction: a new claim is refused with store.ErrFull and writes
// nothing, as is a take-over of an abandoned entry, while every step of
// a claim granted before memory ran out (Complete, Extend, Release,
// Abandon) goes through, and claims of keys that hold an entry (a replay,
// an in-flight duplicate, kept or not) still answer.
func TestOutOfMemory(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	rdb := srv.Client()
	st := redisstore.New(rdb)
	ctx := t.Context()
	if err := st.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	// Every case's entry is made while memory is free.
	type prepared struct {
		key, token string
		fp         []byte
	}
	claim := func(completed bool) prepared {
		p := prepared{key: newKey(t), fp: fp()}
		c, err := st.Claim(ctx, p.key, p.fp, longTTL, store.ClaimOptions{})
		if err != nil || !c.Won() {
			t.Fatalf("Claim before the fill = %+v, %v", c, err)
		}
		p.token = c.Token
		if completed {
			if err := st.Complete(ctx, p.key, p.token, []byte("stored"), longTTL); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	layout1 := func(bool) prepared {
		p := prepared{key: newKey(t), fp: fp(), token: "layout1-owner-token-22"}
		writeLayout1(t, rdb, redisstore.DefaultPrefix+p.key, "c", p.token, p.fp, []byte("stored"))
		return p
	}
	keptOpts := store.ClaimOptions{Keep: longTTL, TakeOver: true}
	// kept claims with Keep; abandon (the case's completed) abandons the claim.
	kept := func(abandon bool) prepared {
		p := prepared{key: newKey(t), fp: fp()}
		c, err := st.Claim(ctx, p.key, p.fp, longTTL, keptOpts)
		if err != nil || !c.Won() {
			t.Fatalf("kept Claim before the fill = %+v, %v", c, err)
		}
		p.token = c.Token
		if abandon {
			if err := st.Abandon(ctx, p.key, p.token); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	cases := []struct {
		name      string
		completed bool
		run       func(t *testing.T, ctx context.Context, p prepared)
		prepare   func(completed bool) prepared // claim unless set
	}{
		{"NewClaimIsFull", false, func(t *testing.T, ctx context.Context, _ prepared) {
			key := newKey(t)
			if _, err := st.Claim(ctx, key, fp(), longTTL, store.ClaimOptions{}); !errors.Is(err, store.ErrFull) {
				t.Fatalf("Claim of a new key = %v, want store.ErrFull", err)
			}
			if n := rdb.Exists(ctx, redisstore.DefaultPrefix+key).Val(); n != 0 {
				t.Fatal("a refused claim left an entry")
			}
		}, nil},
		{"CompleteOfGrantedClaim", false, func(t *testing.T, ctx context.Context, p prepared) {
			data := bytes.Repeat([]byte{0xab}, 64<<10)
			if err := st.Complete(ctx, p.key, p.token, data, longTTL); err != nil {
				t.Fatalf("Complete of a claim granted before OOM: %v", err)
			}
			wantEntry(t, ctx, st, p.key, store.StateCompleted, p.fp, data)
		}, nil},
		{"ExtendOfGrantedClaim", false, func(t *testing.T, ctx context.Context, p prepared) {
			if err := st.Extend(ctx, p.key, p.token, 2*longTTL); err != nil {
				t.Fatalf("Extend of a claim granted before OOM: %v", err)
			}
			if pttl := rdb.PTTL(ctx, redisstore.DefaultPrefix+p.key).Val(); pttl <= longTTL {
				t.Fatalf("PTTL after Extend = %v, want over %v", pttl, longTTL)
			}
		}, nil},
		{"ReleaseOfGrantedClaim", false, func(t *testing.T, ctx context.Context, p prepared) {
			if err := st.Release(ctx, p.key, p.token); err != nil {
				t.Fatalf("Release of a claim granted before OOM: %v", err)
			}
			if n := rdb.Exists(ctx, redisstore.DefaultPrefix+p.key).Val(); n != 0 {
				t.Fatal("the released entry is still there")
			}
		}, nil},
		{"ReplayOfCompletedKey", true, func(t *testing.T, ctx context.Context, p prepared) {
			wantEntry(t, ctx, st, p.key, store.StateCompleted, p.fp, []byte("stored"))
		}, nil},
		{"InFlightDuplicate", false, func(t *testing.T, ctx context.Context, p prepared) {
			wantEntry(t, ctx, st, p.key, store.StateInFlight, p.fp, nil)
		}, nil},
		{"ReplayOfLayout1Entry", true, func(t *testing.T, ctx context.Context, p prepared) {
			wantEntry(t, ctx, st, p.key, store.StateCompleted, p.fp, []byte("stored"))
		}, layout1},
		{"CompleteResentByItsOwner", true, func(t *testing.T, ctx context.Context, p prepared) {
			if err := st.Complete(ctx, p.key, p.token, []byte("again"), longTTL); err != nil {
				t.Fatalf("Complete resent by its owner under OOM: %v", err)
			}
			wantEntry(t, ctx, st, p.key, store.StateCompleted, p.fp, []byte("stored"))
		}, nil},
		{"ResentClaimOfItsOwnToken", false, func(t *testing.T, ctx context.Context, p prepared) {
			// A resend of the claim that made the entry (go-redis after a
			// lost reply): Redis refuses the SET before it runs, the GET
			// that follows finds the claim's own token, and it is won.
			c, err := st.ClaimWithToken(ctx, p.key, p.token, p.fp, longTTL)
			if err != nil || c.Token != p.token {
				t.Fatalf("resent claim = %+v, %v; want won with its token", c, err)
			}
		}, nil},
		{"KeptDuplicate", false, func(t *testing.T, ctx context.Context, p prepared) {
			wantEntry(t, ctx, st, p.key, store.StateInFlight, p.fp, nil)
		}, kept},
		{"AbandonOfKeptClaim", false, func(t *testing.T, ctx context.Context, p prepared) {
			if err := st.Abandon(ctx, p.key, p.token); err != nil {
				t.Fatalf("Abandon of a kept claim granted before OOM: %v", err)
			}
			wantEntry(t, ctx, st, p.key, store.StateAbandoned, p.fp, nil)
		}, kept},
		{"TakeOverIsFull", true, func(t *testing.T, ctx context.Context, p prepared) {
			// A take-over writes a new claim: refused as one, and the
			// entry stays abandoned, its owner's.
			if c, err := st.Claim(ctx, p.key, p.fp, longTTL, keptOpts); !errors.Is(err, store.ErrFull) {
				t.Fatalf("take-over Claim under OOM = %+v, %v; want store.ErrFull", c, err)
			}
			wantEntry(t, ctx, st, p.key, store.StateAbandoned, p.fp, nil)
			if err := st.Complete(ctx, p.key, p.token, []byte("late"), longTTL); err != nil {
				t.Fatalf("Complete by the abandoned owner under OOM: %v", err)
			}
		}, kept},
	}
	prep := make([]prepared, len(cases))
	for i, tc := range cases {
		if tc.prepare == nil {
			tc.prepare = claim
		}
		prep[i] = tc.prepare(tc.completed)
	}
	srv.FillMemory(ctx, "filler:")
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			wantOOM(t, ctx, rdb)
			tc.run(t, ctx, prep[i])
		})
	}
}

// wantOOM fails the test unless Redis refuses a new write for lack of
// memory.
func wantOOM(t *testing.T, ctx context.Context, rdb redis.Cmdable) {
	t.Helper()
	if err := rdb.Set(ctx, newKey(t), "probe", time.Minute).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM ") {
		t.Fatalf("SET of a new key = %v, want OOM: Redis is not out of memory", err)
	}
}

// wantEntry fails the test unless a Claim of key, which must not win,
// reports an entry in state with fp and data.
func wantEntry(t *testing.T, ctx context.Context, st *redisstore.Store, key string, state store.State, fp, data []byte) {
	t.Helper()
	c, err := st.Claim(ctx, key, []byte("probe"), longTTL, store.ClaimOptions{})
	if err != nil {
		t.Fatalf("Claim of a key that holds an entry: %v", err)
	}
	if c.Won() || c.Existing.State != state || !bytes.Equal(c.Existing.Fingerprint, fp) || !bytes.Equal(c.Existing.Data, data) {
		t.Fatalf("Claim = won %v, %s with %d bytes of data; want %s with the stored fingerprint and %d bytes", c.Won(), c.Existing.State, len(c.Existing.Data), state, len(data))
	}
}
