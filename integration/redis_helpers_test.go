package idempotency_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// redisTestTimeout bounds every call a Redis test makes, so a hang fails
// the test instead of waiting for go test's global timeout.
const redisTestTimeout = 60 * time.Second

// redisCtx returns the test's context bounded by redisTestTimeout.
func redisCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), redisTestTimeout)
	t.Cleanup(cancel)
	return ctx
}

// redisRig is one gRPC server on bufconn ([testkit.Serve]) running the
// idempotency interceptor over one store (a redisstore.Store on a go-redis
// client of its own, possibly wrapped): outer interceptors → idempotency →
// handler.
type redisRig struct {
	srv    *testserver.Server
	client testingv1.TestServiceClient
	events *events
}

// redisRigConfig configures newRedisRig. The zero value runs
// testserver.Echo with the default options.
type redisRigConfig struct {
	handler testserver.HandlerFunc
	// outer interceptors run outside the idempotency interceptor, in order.
	outer []grpc.UnaryServerInterceptor
	// events receives the observer events; a new recorder when nil.
	events *events
	opts   []idempotency.ServerOption
}

// newRedisRig starts a server with the idempotency interceptor over st and
// dials it. The server stops and the client closes when the test ends.
func newRedisRig(t *testing.T, st store.Store, cfg redisRigConfig) *redisRig {
	t.Helper()
	r := testkit.Serve(t, testkit.Config{Handler: cfg.handler, Store: st, Options: cfg.opts, Events: cfg.events, Outer: cfg.outer})
	return &redisRig{srv: r.Server, client: r.Client(t), events: r.Events}
}

// do calls Do with key and returns the response and the response header.
func (r *redisRig) do(ctx context.Context, key string, req *testingv1.DoRequest) (*testingv1.DoResponse, metadata.MD, error) {
	var header metadata.MD
	resp, err := r.client.Do(withKey(ctx, key), req, grpc.Header(&header))
	return resp, header, err
}

// sharedCounter numbers executions across every server whose handler it
// wraps, as one execution counter for several servers.
type sharedCounter struct{ n atomic.Int64 }

// handler returns a handler that counts the execution, runs before (when
// not nil) with the execution's number, and answers like testserver.Echo
// with that number in Execution.
func (c *sharedCounter) handler(before func(ctx context.Context, n int64)) testserver.HandlerFunc {
	return func(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		n := c.n.Add(1)
		if before != nil {
			before(ctx, n)
		}
		resp, err := testserver.Echo(ctx, method, req)
		if resp != nil {
			resp.Execution = n
		}
		return resp, err
	}
}

// load returns the number of executions so far.
func (c *sharedCounter) load() int64 { return c.n.Load() }

// doRetryingInUse calls Do on client with key until the answer is not
// ABORTED with IDEMPOTENCY_KEY_IN_USE, waiting the RetryInfo delay before
// each retry, as a client honouring the server's advice would. It returns
// the final answer, its header and the number of attempts.
func doRetryingInUse(ctx context.Context, client testingv1.TestServiceClient, key string, req *testingv1.DoRequest) (*testingv1.DoResponse, metadata.MD, int, error) {
	for attempt := 1; ; attempt++ {
		var header metadata.MD
		resp, err := client.Do(withKey(ctx, key), req, grpc.Header(&header))
		ei, ri := errorInfo(err)
		if status.Code(err) != codes.Aborted || ei.GetReason() != idempotency.ErrKeyInUse.Reason {
			return resp, header, attempt, err
		}
		if ri == nil {
			return nil, nil, attempt, fmt.Errorf("attempt %d: IDEMPOTENCY_KEY_IN_USE without RetryInfo: %w", attempt, err)
		}
		select {
		case <-time.After(ri.GetRetryDelay().AsDuration()):
		case <-ctx.Done():
			return nil, nil, attempt, fmt.Errorf("attempt %d: %w (last answer: %v)", attempt, ctx.Err(), err)
		}
	}
}

// deterministic returns the deterministic encoding of m.
func deterministic(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantReplayed fails the test unless header carries the replay marker
// exactly when want is set.
func wantReplayed(t *testing.T, header metadata.MD, want bool) {
	t.Helper()
	got := header.Get(idempotency.ReplayedKey)
	if want && (len(got) != 1 || got[0] != "true") {
		t.Fatalf("header %s = %q, want [true]: the answer should be a replay", idempotency.ReplayedKey, got)
	}
	if !want && len(got) != 0 {
		t.Fatalf("header %s = %q, want none: the handler should have run", idempotency.ReplayedKey, got)
	}
}

// redisKeys returns every key under prefix in rdb (a single node), found
// with SCAN.
func redisKeys(ctx context.Context, t *testing.T, rdb redis.Cmdable, prefix string) []string {
	t.Helper()
	var keys []string
	iter := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN %s*: %v", prefix, err)
	}
	return keys
}

// redisOnlyKey returns the one key under prefix in rdb and fails the test
// when there is not exactly one.
func redisOnlyKey(ctx context.Context, t *testing.T, rdb redis.Cmdable, prefix string) string {
	t.Helper()
	keys := redisKeys(ctx, t, rdb, prefix)
	if len(keys) != 1 {
		t.Fatalf("SCAN %s* found %q, want exactly one key", prefix, keys)
	}
	return keys[0]
}
