package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestRedisDown checks that with Redis stopped every operation fails with
// an error that is neither corruption nor a lost lease (the interceptor
// reports it as unavailable), and that the same client and store work
// again once Redis is back.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	opt := srv.Options()
	opt.MaxRetries = 1
	opt.DialTimeout = time.Second
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	st := redisstore.New(rdb)
	ctx := t.Context()
	key := newKey(t)
	c, err := st.Claim(ctx, key, fp(), longTTL, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim = %+v, %v", c, err)
	}

	srv.Stop()
	_, claimErr := st.Claim(ctx, newKey(t), fp(), longTTL, store.ClaimOptions{})
	for op, err := range map[string]error{
		"Claim":    claimErr,
		"Complete": st.Complete(ctx, key, c.Token, []byte("x"), longTTL),
		"Extend":   st.Extend(ctx, key, c.Token, longTTL),
		"Release":  st.Release(ctx, key, c.Token),
	} {
		if err == nil || errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrFull) {
			t.Errorf("%s with Redis down = %v; want a plain error", op, err)
		}
	}

	srv.Restart() // empty: persistence is off
	c, err = st.Claim(ctx, key, fp(), longTTL, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim after restart = %+v, %v; want a win with the same client", c, err)
	}
	if err := st.Complete(ctx, key, c.Token, []byte("x"), longTTL); err != nil {
		t.Fatalf("Complete after restart: %v", err)
	}
}

// TestDeadline checks that an expired deadline is honoured and reported.
func TestDeadline(t *testing.T) {
	t.Parallel()
	st := redisstore.New(redistest.StartServer(t).Client())
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := st.Claim(ctx, newKey(t), fp(), longTTL, store.ClaimOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Claim with an expired deadline = %v, want context.DeadlineExceeded", err)
	}
}
