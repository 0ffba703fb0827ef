package idempotency_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultproxy"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/redistest"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// Soak shape: soakCalls logical calls from soakCallers goroutines.
const (
	soakCalls   = 10_000
	soakCallers = 32
	soakLease   = 500 * time.Millisecond
)

// TestChaosSoak sends 10,000 calls, each with its own key, from 32
// goroutines through the client interceptor (with retries) to two server
// instances. Each attempt goes to a random instance. Each instance has its
// own redisstore on its own go-redis client, connected through its own
// fault proxy to one redis-server, and the proxies cut connections at
// random all along: every live connection at once, or one connection
// mid-command (the command runs in Redis, its reply is lost).
//
// It proves: no key is ever executed twice (a per-key counter in the
// handler); every call ends with its own answer or with a retryable error
// the client gave up on (UNAVAILABLE, or ABORTED IDEMPOTENCY_KEY_IN_USE);
// once the faults stop, retrying each given-up call with its key ends with
// exactly one execution of that key, so nothing is lost either; and, through
// TestMain's goleak check, nothing leaks.
func TestChaosSoak(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	rs := redistest.StartServer(t)

	var perKey sync.Map // client key -> *atomic.Int64
	handler := func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		key := metadata.ValueFromIncomingContext(ctx, idempotency.MetadataKey)
		if len(key) != 1 {
			return nil, status.Error(codes.Internal, "soak: call without exactly one key")
		}
		c, _ := perKey.LoadOrStore(key[0], new(atomic.Int64))
		n := c.(*atomic.Int64).Add(1)
		return &testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount(), Execution: n}, nil
	}

	var proxies [2]*faultproxy.Proxy
	var conns [2]*grpc.ClientConn
	var observed [2]outcomeCounts
	var first *testserver.Server
	for i := range proxies {
		proxies[i] = chaosProxy(t, rs.Addr())
		st := redisstore.New(chaosRedis(t, proxies[i].Addr(), true))
		if err := st.LoadScripts(ctx); err != nil {
			t.Fatal(err)
		}
		srv := testserver.New(t, &testserver.Service{Handler: handler}, grpc.ChainUnaryInterceptor(
			idempotency.UnaryServerInterceptor(st,
				idempotency.WithLease(soakLease),
				idempotency.WithRetryAfter(25*time.Millisecond),
				idempotency.WithStoreTimeout(2*time.Second),
				idempotency.WithObserver(&observed[i]))))
		conns[i] = srv.Dial(t)
		if first == nil {
			first = srv
		}
	}
	// spread sends each attempt to a random instance, so a retry often
	// lands on the instance that did not see the first attempt.
	spread := func(ctx context.Context, method string, req, reply any, _ *grpc.ClientConn, _ grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return conns[rand.IntN(len(conns))].Invoke(ctx, method, req, reply, opts...)
	}
	dial := func(opts ...idempotency.ClientOption) testingv1.TestServiceClient {
		return first.Client(t, grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor(opts...), spread))
	}
	client := dial(idempotency.WithMaxAttempts(6),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return time.Duration(rand.IntN(20)) * time.Millisecond }))

	stop := make(chan struct{})
	var chaos sync.WaitGroup
	var cutAlls, cutReplies atomic.Int64
	chaos.Add(1)
	go func() {
		defer chaos.Done()
		for {
			tm := time.NewTimer(time.Duration(1+rand.IntN(8)) * time.Millisecond)
			select {
			case <-stop:
				tm.Stop()
				return
			case <-tm.C:
			}
			p := proxies[rand.IntN(len(proxies))]
			switch {
			case rand.IntN(4) == 0:
				p.CutAll()
				cutAlls.Add(1)
			case p.ArmedCuts() == 0:
				// Armed cuts would pile up whenever fewer replies flow
				// than cuts are armed (round trips are shared), and then
				// drop every reply: arm the next once the last is spent.
				p.CutNextReply(1)
				cutReplies.Add(1)
			}
		}
	}()

	start := time.Now()
	type giveUp struct {
		key    string
		amount int64
		err    error
	}
	var (
		next    atomic.Int64
		answers atomic.Int64
		mu      sync.Mutex
		gaveUp  []giveUp
		wrong   []string
	)
	var callers sync.WaitGroup
	for range soakCallers {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for {
				i := next.Add(1) - 1
				if i >= soakCalls {
					return
				}
				key := fmt.Sprintf("soak-%05d", i)
				resp, err := client.Do(ctx, &testingv1.DoRequest{Payload: key, Amount: i}, idempotency.WithKey(key))
				switch {
				case err == nil && resp.GetPayload() == key && resp.GetAmount() == i && resp.GetExecution() == 1:
					answers.Add(1)
				case err == nil:
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%s: answer %v is not its own", key, resp))
					mu.Unlock()
				case retryableGiveUp(err):
					mu.Lock()
					gaveUp = append(gaveUp, giveUp{key, i, err})
					mu.Unlock()
				default:
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%s: %v is neither an answer nor a retryable error", key, err))
					mu.Unlock()
				}
			}
		}()
	}
	callers.Wait()
	elapsed := time.Since(start)
	close(stop)
	chaos.Wait()

	for _, w := range wrong[:min(len(wrong), 10)] {
		t.Error(w)
	}
	doubles := 0
	perKey.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n > 1 {
			doubles++
			if doubles <= 10 {
				t.Errorf("key %s executed %d times", k, n)
			}
		}
		return true
	})
	byCode := map[string]int{}
	for _, g := range gaveUp {
		byCode[status.Code(g.err).String()+"/"+clientReason(g.err)]++
	}
	t.Logf("soak: %d calls from %d goroutines in %v: %d answers, %d give-ups %v, %d double executions, %d wrong",
		soakCalls, soakCallers, elapsed.Round(time.Millisecond), answers.Load(), len(gaveUp), byCode, doubles, len(wrong))
	t.Logf("faults: %d cut-all events, %d mid-command cuts armed; connections cut %d + %d, accepted %d + %d",
		cutAlls.Load(), cutReplies.Load(), proxies[0].Cuts(), proxies[1].Cuts(), proxies[0].Accepted(), proxies[1].Accepted())
	t.Logf("instance A outcomes: %v", &observed[0])
	t.Logf("instance B outcomes: %v", &observed[1])
	if got := answers.Load() + int64(len(gaveUp)) + int64(len(wrong)); got != soakCalls {
		t.Fatalf("%d calls ended, want %d", got, soakCalls)
	}
	if doubles > 0 || len(wrong) > 0 {
		t.FailNow()
	}
	if answers.Load() == 0 || proxies[0].Cuts()+proxies[1].Cuts() == 0 {
		t.Fatal("the soak proved nothing: no answers or no cuts")
	}

	// The faults are over: each given-up call, retried with its key, ends
	// with one execution (its first, or a replay of it).
	patient := dial(idempotency.WithMaxAttempts(200),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 10 * time.Millisecond }))
	heal := make(chan giveUp)
	var healers sync.WaitGroup
	var healErr atomic.Value
	for range soakCallers {
		healers.Add(1)
		go func() {
			defer healers.Done()
			for g := range heal {
				resp, err := patient.Do(ctx, &testingv1.DoRequest{Payload: g.key, Amount: g.amount}, idempotency.WithKey(g.key))
				if err != nil || resp.GetPayload() != g.key || resp.GetExecution() != 1 {
					healErr.CompareAndSwap(nil, fmt.Sprintf("retrying given-up %s after the faults: %v, %v; want its one execution", g.key, resp, err))
				}
			}
		}()
	}
	for _, g := range gaveUp {
		heal <- g
	}
	close(heal)
	healers.Wait()
	if msg := healErr.Load(); msg != nil {
		t.Fatal(msg)
	}
	executed := 0
	perKey.Range(func(_, v any) bool {
		if v.(*atomic.Int64).Load() == 1 {
			executed++
		}
		return true
	})
	if executed != soakCalls {
		t.Fatalf("%d keys executed exactly once, want all %d", executed, soakCalls)
	}
}

// retryableGiveUp reports whether err is one the client retries, so a call
// ending with it ran out of attempts.
func retryableGiveUp(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable:
		return true
	case codes.Aborted:
		return clientReason(err) == idempotency.ReasonKeyInUse
	}
	return false
}
