package idempotency_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestRedisStoreDown: with Redis stopped, a server failing closed (the
// default) answers UNAVAILABLE with IDEMPOTENCY_STORE_UNAVAILABLE and does
// not run the handler, while a server built WithFailOpen runs it and tells
// the observer. After Redis restarts, both serve again with dedup, with the
// same gRPC servers and the same go-redis clients.
func TestRedisStoreDown(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	rs := redistest.StartServer(t)
	// newClient returns a client that gives up dialing a stopped Redis
	// after one attempt (go-redis tries 5 times, 100ms apart, by default),
	// only to keep the test fast.
	newClient := func() *redis.Client {
		opt := rs.Options()
		opt.DialerRetries = 1
		rdb := redis.NewClient(opt)
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	closed := newRedisRig(t, redisstore.New(newClient()), redisRigConfig{})
	open := newRedisRig(t, redisstore.New(newClient()), redisRigConfig{opts: []idempotency.ServerOption{idempotency.WithFailOpen()}})
	req := &testingv1.DoRequest{Payload: "p"}
	for name, r := range map[string]*redisRig{"fail-closed": closed, "fail-open": open} {
		if _, _, err := r.do(ctx, "k-up-"+name, req); err != nil {
			t.Fatalf("%s, Redis up: %v", name, err)
		}
	}

	rs.Stop()
	_, _, err := closed.do(ctx, "k-down", req)
	wantReason(t, err, codes.Unavailable, idempotency.ErrStoreUnavailable.Reason)
	if n := closed.srv.Service.Executions(); n != 1 {
		t.Fatalf("fail closed: handler ran %d times, want 1 (not while Redis is down)", n)
	}
	if closed.events.Count(idempotency.DecisionStoreError) == 0 {
		t.Fatal("fail closed: no DecisionStoreError observed")
	}
	for range 2 { // no dedup without a store: both run
		if _, header, err := open.do(ctx, "k-down", req); err != nil {
			t.Fatalf("fail open, Redis down: %v", err)
		} else {
			wantReplayed(t, header, false)
		}
	}
	if n := open.srv.Service.Executions(); n != 3 {
		t.Fatalf("fail open: handler ran %d times, want 3 (1 before, 2 while down)", n)
	}
	if n := open.events.Count(idempotency.DecisionFailOpen); n != 2 {
		t.Fatalf("fail open: %d DecisionFailOpen events, want 2", n)
	}

	rs.Restart()
	for name, r := range map[string]*redisRig{"fail-closed": closed, "fail-open": open} {
		before := r.srv.Service.Executions()
		for i := range 2 {
			_, header, err := r.do(ctx, "k-back-"+name, req)
			if err != nil {
				t.Fatalf("%s, after restart, call %d: %v", name, i+1, err)
			}
			wantReplayed(t, header, i == 1)
		}
		if n := r.srv.Service.Executions() - before; n != 1 {
			t.Fatalf("%s, after restart: handler ran %d times for one key, want 1", name, n)
		}
	}
	if n := open.events.Count(idempotency.DecisionFailOpen); n != 2 {
		t.Fatalf("fail open: %d DecisionFailOpen events after restart, want still 2", n)
	}
}

// TestRedisCorruptData: values written straight into Redis under the
// store's key of a completed call (a plain string, or the store's entry
// with garbage over its first bytes) make the next call with that key fail
// with INTERNAL and IDEMPOTENCY_RECORD_CORRUPT, without running the
// handler, overwriting the value or panicking.
func TestRedisCorruptData(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	rdb := rs.Client()
	for _, tc := range []struct {
		name    string
		corrupt func(ctx context.Context, key string) error
		// still reads the value back, to check it was left alone.
		still func(ctx context.Context, key string) (string, error)
	}{
		{
			name:    "String",
			corrupt: func(ctx context.Context, key string) error { return rdb.Set(ctx, key, "garbage", 0).Err() },
			still:   func(ctx context.Context, key string) (string, error) { return rdb.Get(ctx, key).Result() },
		},
		{
			name:    "EntryWithGarbageHeader",
			corrupt: func(ctx context.Context, key string) error { return rdb.SetRange(ctx, key, 0, "garbage").Err() },
			still:   func(ctx context.Context, key string) (string, error) { return rdb.GetRange(ctx, key, 0, 6).Result() },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := redisCtx(t)
			prefix := "idempotency-corrupt-" + tc.name + ":"
			panicked := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("the interceptor panicked: %v", p)
						err = status.Error(codes.Unknown, "panic")
					}
				}()
				return handler(ctx, req)
			}
			r := newRedisRig(t, redisstore.New(rdb, redisstore.WithPrefix(prefix)), redisRigConfig{
				outer: []grpc.UnaryServerInterceptor{panicked},
			})
			req := &testingv1.DoRequest{Payload: "p"}
			if _, _, err := r.do(ctx, "k-corrupt", req); err != nil {
				t.Fatal(err)
			}
			key := redisOnlyKey(ctx, t, rdb, prefix)
			if typ, err := rdb.Type(ctx, key).Result(); err != nil || typ != "string" {
				t.Fatalf("TYPE %s = %q, %v; want the store's entry, a string", key, typ, err)
			}
			if err := tc.corrupt(ctx, key); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				_, _, err := r.do(ctx, "k-corrupt", req)
				wantReason(t, err, codes.Internal, idempotency.ErrRecordCorrupt.Reason)
				if i == 0 && r.events.Count(idempotency.DecisionRecordCorrupt) != 1 {
					t.Fatal("no DecisionRecordCorrupt observed")
				}
			}
			if n := r.srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1 (never over a corrupt record)", n)
			}
			if got, err := tc.still(ctx, key); err != nil || got != "garbage" {
				t.Fatalf("value after the calls = %q, %v; want the garbage left as it was", got, err)
			}
		})
	}
}
