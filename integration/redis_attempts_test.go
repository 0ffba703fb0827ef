package idempotency_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestRedisStoreErrorPerAttempt: each failed store attempt is one
// DecisionStoreError with its own StoreTime. Redis stops while the handler
// runs, so every attempt to store its outcome fails, and so does every
// lease renewal in between when the lease is short. The observer gets
// exactly one DecisionStoreError per store call that failed (counted by a
// faultstore around the real redisstore), numbered 1, 2, ... within its
// step, each with that attempt's StoreTime alone: their sum is no more than
// the call took, so a metric summing them counts each attempt once.
func TestRedisStoreErrorPerAttempt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []idempotency.ServerOption
	}{
		{"complete", []idempotency.ServerOption{idempotency.WithStoreTimeout(400 * time.Millisecond)}},
		{"complete and renewals", []idempotency.ServerOption{idempotency.WithStoreTimeout(400 * time.Millisecond),
			idempotency.WithLease(150 * time.Millisecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := redisCtx(t)
			rs := redistest.StartServer(t)
			opt := rs.Options()
			opt.DialerRetries = 1 // one dial per command, only to keep the test fast
			rdb := redis.NewClient(opt)
			t.Cleanup(func() { _ = rdb.Close() })
			fs := faultstore.New(redisstore.New(rdb))
			r := newRedisRig(t, fs, redisRigConfig{
				handler: func(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
					rs.Stop()
					return &testingv1.DoResponse{Payload: req.GetPayload()}, nil
				},
				opts: tt.opts,
			})
			start := time.Now()
			if _, _, err := r.do(ctx, "k", &testingv1.DoRequest{Payload: "p"}); err != nil {
				t.Fatalf("the handler's answer was lost: %v", err)
			}
			took := time.Since(start)

			// The store call behind each event: the same error value.
			opOf := map[error]string{}
			failed := map[string]int{}
			for _, c := range fs.Calls() {
				if c.Err != nil {
					opOf[c.Err] = c.Op
					failed[c.Op]++
				}
			}
			attempts := map[string][]int{}
			var total time.Duration
			for _, e := range r.events.All() {
				if e.Decision != idempotency.DecisionStoreError {
					if e.Attempt != 0 {
						t.Errorf("%v event with Attempt %d, want 0", e.Decision, e.Attempt)
					}
					continue
				}
				op, ok := opOf[e.Err]
				if !ok {
					t.Fatalf("store_error event %v matches no failed store call", e.Err)
				}
				attempts[op] = append(attempts[op], e.Attempt)
				total += e.StoreTime
			}
			t.Logf("failed calls %v, attempts %v, total %v, took %v", failed, attempts, total, took)
			if failed["complete"] < 2 {
				t.Fatalf("%d failed Complete calls, want the step retried", failed["complete"])
			}
			for op, n := range failed {
				want := make([]int, n)
				for i := range want {
					want[i] = i + 1
				}
				if !slices.Equal(attempts[op], want) {
					t.Errorf("%s: %d failed calls, store_error attempts %v; want one event each, numbered %v", op, n, attempts[op], want)
				}
			}
			if total > took {
				t.Errorf("store_error events add up to %v of store time in a call that took %v: attempts counted more than once", total, took)
			}
		})
	}
}
