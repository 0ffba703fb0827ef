package idempotency_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestRedisExactlyOnceAcrossInstances: a key executes once across four gRPC
// servers that share one Redis (and again one Cluster), each with its own
// interceptor, store and go-redis client. 200 callers send the same key and
// request at once, spread over the four, and retry on
// IDEMPOTENCY_KEY_IN_USE after the RetryInfo delay. The handler, counted
// across the four servers, runs once, and all 200 get identical bytes.
//
// The handler holds its claim until every server has rejected a duplicate
// as in flight, so the dedup is shown to go through Redis: three of the
// servers never see the execution except as a Redis entry.
func TestRedisExactlyOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	for name, start := range redisBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const servers, callers = 4, 200
			ctx := redisCtx(t)
			newClient := start(t)
			var count sharedCounter
			evs := make([]*events, servers)
			for i := range evs {
				evs[i] = &events{}
			}
			everyServerRejected := func(ctx context.Context, _ int64) {
				for _, ev := range evs {
					select {
					case <-ev.Seen(idempotency.DecisionInFlight):
					case <-time.After(10 * time.Second): // reported below as missing contention
						return
					case <-ctx.Done():
						return
					}
				}
			}
			rigs := make([]*redisRig, servers)
			for i := range rigs {
				rigs[i] = newRedisRig(t, redisstore.New(newClient()), redisRigConfig{
					handler: count.handler(everyServerRejected),
					events:  evs[i],
					opts:    []idempotency.ServerOption{idempotency.WithRetryAfter(20 * time.Millisecond)},
				})
			}

			req := &testingv1.DoRequest{Payload: "charge", Amount: 4200}
			type answer struct {
				resp     *testingv1.DoResponse
				replayed bool
				attempts int
				err      error
			}
			answers := make([]answer, callers)
			begin := make(chan struct{})
			var wg sync.WaitGroup
			for c := range callers {
				wg.Go(func() {
					<-begin
					resp, header, attempts, err := doRetryingInUse(ctx, rigs[c%servers].client, "k-once", req)
					answers[c] = answer{resp: resp, attempts: attempts, err: err, replayed: len(header.Get(idempotency.ReplayedKey)) == 1}
				})
			}
			close(begin)
			wg.Wait()

			if n := count.load(); n != 1 {
				t.Fatalf("handler ran %d times across %d servers, want 1", n, servers)
			}
			replayed, retried := 0, 0
			var want []byte
			for c, a := range answers {
				if a.err != nil {
					t.Fatalf("caller %d (server %d): %v", c, c%servers, a.err)
				}
				got := deterministic(t, a.resp)
				if c == 0 {
					want = got
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("caller %d got %x (%v), caller 0 got %x", c, got, a.resp, want)
				}
				if a.replayed {
					replayed++
				}
				if a.attempts > 1 {
					retried++
				}
			}
			if replayed != callers-1 {
				t.Fatalf("%d replayed answers, want %d (all but the executing caller)", replayed, callers-1)
			}
			for i, ev := range evs {
				if ev.Count(idempotency.DecisionInFlight) == 0 {
					t.Fatalf("server %d never saw the key in flight: no contention was tested", i)
				}
			}
			t.Logf("%d callers, %d retried at least once, %d replays", callers, retried, replayed)
		})
	}
}

// TestRedisCrashAndRetryElsewhere: a retry sent to another server after a
// crash is a replay. Server A runs the handler and stores the outcome in
// Redis, then stops before its answer reaches the client, so the client's
// first attempt fails. The retry with the same key, sent to server B on the
// same Redis, is a replay, and the handler has run once.
func TestRedisCrashAndRetryElsewhere(t *testing.T) {
	t.Parallel()
	ctx := redisCtx(t)
	rs := redistest.StartServer(t)
	var count sharedCounter
	completed := make(chan struct{})
	// crash sits outside the idempotency interceptor: when the call has
	// run and been stored, it tells the test and holds the answer until
	// the server is stopped, which cancels the call's context.
	crash := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		close(completed)
		<-ctx.Done()
		return resp, err
	}
	a := newRedisRig(t, redisstore.New(rs.Client()), redisRigConfig{handler: count.handler(nil), outer: []grpc.UnaryServerInterceptor{crash}})
	b := newRedisRig(t, redisstore.New(rs.Client()), redisRigConfig{handler: count.handler(nil)})

	req := &testingv1.DoRequest{Payload: "transfer", Amount: 7}
	first := make(chan error, 1)
	go func() {
		_, _, err := a.do(ctx, "k-crash", req)
		first <- err
	}()
	select {
	case <-completed:
	case err := <-first:
		t.Fatalf("first attempt returned before the handler completed: %v", err)
	}
	a.srv.Stop()
	if err := <-first; status.Code(err) != codes.Unavailable {
		t.Fatalf("first attempt = %v, want UNAVAILABLE: its server stopped before answering", err)
	}

	resp, header, err := b.do(ctx, "k-crash", req)
	if err != nil {
		t.Fatal(err)
	}
	wantReplayed(t, header, true)
	if resp.GetExecution() != 1 || resp.GetPayload() != "transfer" || resp.GetAmount() != 7 {
		t.Fatalf("retry got %v, want the first execution's answer", resp)
	}
	if n := count.load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if n := b.events.Count(idempotency.DecisionReplayed); n != 1 {
		t.Fatalf("server B observed %d replays, want 1", n)
	}
}
