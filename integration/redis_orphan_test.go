package idempotency_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestRedisOrphanClaim: a claim whose reply was lost is not left behind to
// block its key. The claim of a call lands in Redis but its reply is lost
// (the fault proxy cuts the connection); go-redis resends it on a new
// connection, and the resend fails without running: its dial is refused, or
// Redis answers MASTERDOWN (it turned into a replica whose master link is
// down and serves no stale data, as in a failover). The call fails with
// UNAVAILABLE. Once Redis is healthy again, the claim that landed must not
// be left behind: owned by a token nobody holds, it would block the key for
// a whole lease (60s) and refuse the client's retry as in use while no
// handler runs. The retry runs the handler once.
func TestRedisOrphanClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// stage makes the resend fail: dial is called for each dial while
		// the claim is being resent and returns the address to dial;
		// heal runs once the failed claim has returned to the store.
		stage func(t *testing.T, rs *redistest.Server) (dial func(addr string) string, heal func())
	}{
		{"ResendDialRefused", func(t *testing.T, _ *redistest.Server) (func(string) string, func()) {
			refused := closedAddr(t)
			return func(string) string { return refused }, func() {}
		}},
		{"ResendMasterDown", func(t *testing.T, rs *redistest.Server) (func(string) string, func()) {
			direct := rs.Client()
			silent := silentMaster(t)
			var demote sync.Once
			dial := func(addr string) string {
				demote.Do(func() {
					ctx := context.WithoutCancel(t.Context())
					host, port, _ := net.SplitHostPort(silent)
					if err := direct.ConfigSet(ctx, "replica-serve-stale-data", "no").Err(); err != nil {
						t.Errorf("CONFIG SET replica-serve-stale-data: %v", err)
					}
					if err := direct.ReplicaOf(ctx, host, port).Err(); err != nil {
						t.Errorf("REPLICAOF %s: %v", silent, err)
					}
				})
				return addr
			}
			heal := func() {
				if err := direct.ReplicaOf(context.WithoutCancel(t.Context()), "NO", "ONE").Err(); err != nil {
					t.Errorf("REPLICAOF NO ONE: %v", err)
				}
			}
			return dial, heal
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := redisCtx(t)
			rs := redistest.StartServer(t)
			// The store's calls are sequential, so the pool holds the one
			// connection the proxy cuts: the resend has to dial a new one.
			// One dial attempt per connection keeps the refused case fast.
			proxy, rdb := proxiedRedis(t, rs, func(o *redis.Options) { o.DialerRetries = 1 })
			dial, heal := tc.stage(t, rs)
			staged := &resendFailure{dial: dial, heal: heal}
			rdb.AddHook(staged)
			r := newRedisRig(t, redisstore.New(rdb), redisRigConfig{})
			req := &testingv1.DoRequest{Payload: "p"}

			staged.staging.Store(true)
			proxy.CutNextReply(1)
			_, _, err := r.do(ctx, "k-orphan", req)
			wantReason(t, err, codes.Unavailable, idempotency.ErrStoreUnavailable.Reason)
			if proxy.Cuts() != 1 || staged.dials.Load() == 0 || !staged.failed.Load() {
				t.Fatalf("cuts %d, staged dials %d, claim failed %v: the failure was not staged as planned",
					proxy.Cuts(), staged.dials.Load(), staged.failed.Load())
			}
			if keys := redisKeys(ctx, t, rs.Client(), redisstore.DefaultPrefix); len(keys) != 0 {
				t.Errorf("after the failed claim Redis holds %q, want nothing: an orphan claim blocks the key", keys)
			}
			resp, header, err := r.do(ctx, "k-orphan", req)
			if err != nil || resp.GetExecution() != 1 {
				t.Fatalf("retry = %v, %v; want the handler to run", resp, err)
			}
			wantReplayed(t, header, false)
			if n := r.srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}

// resendFailure is a go-redis hook that stages the failure of a resent
// command. While staging, every dial goes to the address dial returns;
// when the claim's SET fails, staging ends and heal runs before the error
// reaches the store.
type resendFailure struct {
	dial func(addr string) string
	heal func()

	staging, failed atomic.Bool
	dials           atomic.Int64
}

func (h *resendFailure) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h.staging.Load() {
			h.dials.Add(1)
			addr = h.dial(addr)
		}
		return next(ctx, network, addr)
	}
}

func (h *resendFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && cmd.Name() == "set" && h.staging.CompareAndSwap(true, false) {
			h.failed.Store(true)
			h.heal()
		}
		return err
	}
}

func (h *resendFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// closedAddr returns a loopback address that refuses connections: a port
// that was just listened on and closed.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// silentMaster returns the address of a listener that takes connections
// and never answers: a master a replica can never sync with. It closes
// when the test ends.
func silentMaster(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}
