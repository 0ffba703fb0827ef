package idempotency_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// redisBackends starts the Redis deployments the multi-node proofs run
// against, each returning a fresh go-redis client on it per call.
var redisBackends = map[string]func(t *testing.T) func() redis.UniversalClient{
	"Standalone": func(t *testing.T) func() redis.UniversalClient {
		srv := redistest.StartServer(t)
		return func() redis.UniversalClient { return srv.Client() }
	},
	"Cluster": func(t *testing.T) func() redis.UniversalClient {
		c := redistest.StartCluster(t)
		return func() redis.UniversalClient { return c.Client() }
	},
}

// TestRedisRoundTrips: through the interceptor, an executed call costs
// exactly two Redis round trips (claim, complete) and a replay exactly one,
// with no renewal round trip when the handler finishes inside a third of
// the lease. A handler held past lease/3 shows that the count does see
// renewals: one more round trip per renewal. The claim is a native SET,
// which a replay needs and nothing more; the completion and the renewals
// are one EVALSHA each.
//
// Round trips are counted by redistest.RoundTrips on the go-redis client
// the store uses. Connection handshakes (HELLO, CLIENT SETINFO, READONLY…)
// are not part of a call's cost: the hook counts them apart, in
// Handshakes, and leaves them out of Count, which is what is asserted.
// The scripts are loaded before counting (LoadScripts), so no
// NOSCRIPT→EVAL fallback is counted either.
func TestRedisRoundTrips(t *testing.T) {
	t.Parallel()
	for name, start := range redisBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := redisCtx(t)
			rdb := start(t)()
			st := redisstore.New(rdb)
			if err := st.LoadScripts(ctx); err != nil {
				t.Fatal(err)
			}
			var rt redistest.RoundTrips
			if err := rt.Attach(ctx, rdb); err != nil {
				t.Fatal(err)
			}
			// want checks the round trips since the last check: one SET,
			// then scripts EVALSHA more.
			want := func(what string, scripts int) {
				t.Helper()
				cmds := append([]string{"set"}, slices.Repeat([]string{"evalsha"}, scripts)...)
				if got := rt.Commands(); rt.Count() != len(cmds) || !slices.Equal(got, cmds) {
					t.Fatalf("%s took %d round trips %q (plus %d handshakes), want %d: %q", what, rt.Count(), got, rt.Handshakes(), len(cmds), cmds)
				}
				rt.Reset()
			}

			fast := newRedisRig(t, st, redisRigConfig{opts: []idempotency.ServerOption{idempotency.WithLease(30 * time.Second)}})
			req := &testingv1.DoRequest{Payload: "p", Amount: 1}
			rt.Reset()
			_, header, err := fast.do(ctx, "k-rt", req)
			if err != nil {
				t.Fatal(err)
			}
			wantReplayed(t, header, false)
			want("executed call", 1)
			_, header, err = fast.do(ctx, "k-rt", req)
			if err != nil {
				t.Fatal(err)
			}
			wantReplayed(t, header, true)
			want("replay", 0)
			if n := fast.events.Count(idempotency.DecisionLeaseRenewed); n != 0 {
				t.Fatalf("%d renewals for a handler that finished inside lease/3", n)
			}
			if n := fast.srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}

			// The counter sees renewals: a handler that waits for its
			// first renewal costs claim + renewals + complete.
			ev := &events{}
			slow := newRedisRig(t, st, redisRigConfig{
				events: ev,
				opts:   []idempotency.ServerOption{idempotency.WithLease(300 * time.Millisecond)},
				handler: func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
					select {
					case <-ev.Seen(idempotency.DecisionLeaseRenewed):
					case <-ctx.Done():
					}
					return &testingv1.DoResponse{Payload: req.GetPayload()}, nil
				},
			})
			rt.Reset()
			if _, err := slow.client.Do(withKey(ctx, "k-rt-slow"), req); err != nil {
				t.Fatal(err)
			}
			renewals := ev.Count(idempotency.DecisionLeaseRenewed)
			if renewals < 1 {
				t.Fatal("no renewal observed")
			}
			want("executed call with renewals", 1+renewals)
		})
	}
}
