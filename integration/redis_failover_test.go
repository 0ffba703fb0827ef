package idempotency_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// Shape of the failover soak.
const (
	failoverCalls   = 2000
	failoverCallers = 32
	// failoverLag is the latency added each way on each replica's
	// replication link, so the replicas trail the master as they would
	// across a network, and a failover has writes to lose.
	failoverLag = 10 * time.Millisecond
	// failoverLease outlasts the failover: an in-flight claim that
	// survives it must still be there when its handler's completion, held
	// back by the failover, lands on the new master.
	failoverLease = 10 * time.Second
)

// TestRedisFailover: what a Sentinel failover does to acknowledged
// completions, with and without WithMinReplicas. A Sentinel-managed master
// with two replicas (each replicating over a link that adds 10 ms each way)
// serves two server instances, each with its own store on its own failover
// client; 32 goroutines make 2,000 calls, each with its own key, through
// the client interceptor (with retries) to a random instance per attempt.
// Once a third of the calls have their answer, the master is killed;
// Sentinel promotes a replica, and the calls go on.
//
// A lost completion is a completion the store acknowledged (Complete
// returned nil to the interceptor: for (store key, token)) that the new
// master does not hold: a retry with that key would run the handler
// again. The test counts them by reading every acknowledged (key, token)
// on the new master after the soak, and then shows what they mean by
// calling every key once more: a key whose handler runs again is a lost
// completion seen by a client.
//
// With WithMinReplicas(1, 1s): 0 double executions (no key's handler ran
// twice, during the soak or in the final pass) and 0 lost completions.
// Without it, the same run is a measurement: the numbers are logged (and
// recorded in BENCHMARKS.md), and only what holds either way is asserted:
// every call ends with its own answer.
func TestRedisFailover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		minReplicas int
	}{
		{"WithMinReplicas1", 1},
		{"WithoutMinReplicas", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := failoverSoak(t, tc.minReplicas)
			t.Logf("%s: %d calls, master killed after %d answers, failover in %v, soak %v: %d double executions, %d acknowledged completions, %d lost, %d keys ran again in the final pass; give-ups healed: %d",
				tc.name, failoverCalls, r.killedAfter, r.failover.Round(time.Millisecond), r.elapsed.Round(time.Millisecond),
				r.doubles, r.acked, r.lost, r.reran, r.gaveUp)
			if tc.minReplicas > 0 && (r.doubles != 0 || r.lost != 0 || r.reran != 0) {
				t.Fatalf("with WithMinReplicas(1): %d double executions, %d lost completions, %d keys ran again; want none", r.doubles, r.lost, r.reran)
			}
		})
	}
}

// failoverResult is what one failover soak counted.
type failoverResult struct {
	killedAfter    int64
	failover       time.Duration
	elapsed        time.Duration
	doubles, reran int
	acked, lost    int
	gaveUp         int
}

// failoverSoak runs the soak of TestRedisFailover and counts.
func failoverSoak(t *testing.T, minReplicas int) failoverResult {
	t.Helper()
	ctx := redisCtx(t)
	var links []*faultproxy.Proxy
	s := redistest.StartSentinelWith(t, redistest.SentinelConfig{
		Replicas:  2,
		DownAfter: time.Second,
		ReplicaLink: func(_ int, master string) string {
			p := chaosProxy(t, master)
			p.SetLatency(failoverLag)
			links = append(links, p)
			return p.Addr()
		},
	})
	keys := newKeyLedger()
	var acked sync.Map // store key + "/" + token -> true
	handler := func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		key := metadata.ValueFromIncomingContext(ctx, idempotency.MetadataKey)
		if len(key) != 1 {
			return nil, status.Error(codes.Internal, "soak: call without exactly one key")
		}
		n := keys.execute(key[0])
		return &testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount(), Execution: n}, nil
	}
	var conns [2]*grpc.ClientConn
	var first *testserver.Server
	for i := range conns {
		opts := s.Options()
		opts.DialTimeout, opts.MaxRetries, opts.ContextTimeoutEnabled = 500*time.Millisecond, 1, true
		rdb := redis.NewFailoverClient(opts)
		t.Cleanup(func() { _ = rdb.Close() })
		var sopts []redisstore.Option
		if minReplicas > 0 {
			sopts = append(sopts, redisstore.WithMinReplicas(minReplicas, time.Second))
		}
		st := &ackedStore{Store: redisstore.New(rdb, sopts...), acked: &acked}
		srv := testserver.New(t, &testserver.Service{Handler: handler}, grpc.ChainUnaryInterceptor(
			idempotency.UnaryServerInterceptor(st,
				idempotency.WithLease(failoverLease),
				idempotency.WithRetryAfter(50*time.Millisecond))))
		conns[i] = srv.Dial(t)
		if first == nil {
			first = srv
		}
	}
	spread := func(ctx context.Context, method string, req, reply any, _ *grpc.ClientConn, _ grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return conns[rand.IntN(len(conns))].Invoke(ctx, method, req, reply, opts...)
	}
	client := first.Client(t, grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor(
		idempotency.WithMaxAttempts(400),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 50 * time.Millisecond }),
	), spread))

	var res failoverResult
	var answers atomic.Int64
	var killer sync.WaitGroup
	killer.Go(func() {
		for answers.Load() < failoverCalls/3 {
			time.Sleep(time.Millisecond)
		}
		old := s.Master.Addr()
		res.killedAfter = answers.Load()
		start := time.Now()
		// The master's host dies: the last 10 ms of its replication
		// stream, still on the way, never reach the replicas.
		for _, p := range links {
			p.Stall()
		}
		s.Master.Stop()
		for _, p := range links {
			p.CutAll()
		}
		s.WaitFailover(ctx, old)
		res.failover = time.Since(start)
	})
	start := time.Now()
	gaveUp := keys.run(ctx, t, client, failoverCalls, failoverCallers, &answers)
	res.elapsed = time.Since(start)
	killer.Wait()
	res.gaveUp = len(gaveUp)
	keys.heal(ctx, t, client, gaveUp)
	res.doubles = keys.doubles(t)

	// Every completion the store acknowledged must be on the new master.
	newMaster, err := s.MasterAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	direct := redis.NewClient(&redis.Options{Addr: newMaster})
	t.Cleanup(func() { _ = direct.Close() })
	acked.Range(func(k, _ any) bool {
		res.acked++
		key, token := splitAcked(k.(string))
		if !completedBy(ctx, t, direct, key, token) {
			res.lost++
		}
		return true
	})
	res.reran = keys.replayAll(ctx, t, client)
	return res
}

// ackedStore records the (key, token) of every completion its store
// acknowledged.
type ackedStore struct {
	store.Store
	acked *sync.Map
}

// Complete implements store.Store.
func (s *ackedStore) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	err := s.Store.Complete(ctx, key, token, data, retention)
	if err == nil {
		s.acked.Store(redisstore.DefaultPrefix+key+"/"+token, true)
	}
	return err
}

// splitAcked splits what ackedStore records into the Redis key and token.
func splitAcked(s string) (key, token string) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// completedBy reports whether Redis holds under key an entry completed by
// token (layout 2: state byte 'c', then the token).
func completedBy(ctx context.Context, t *testing.T, rdb *redis.Client, key, token string) bool {
	t.Helper()
	v, err := rdb.Get(ctx, key).Bytes()
	if err == redis.Nil {
		return false
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	header := entryHeader(t, v)
	tl := int(header[2])
	return header[1] == 'c' && string(header[3:3+tl]) == token
}

// keyLedger counts the executions of each client key across servers, and
// runs calls, each with its own key, the way the soaks do.
type keyLedger struct {
	mu    sync.Mutex
	execs map[string]*atomic.Int64
}

func newKeyLedger() *keyLedger { return &keyLedger{execs: map[string]*atomic.Int64{}} }

// execute counts an execution of key and returns its number.
func (l *keyLedger) execute(key string) int64 {
	l.mu.Lock()
	c, ok := l.execs[key]
	if !ok {
		c = new(atomic.Int64)
		l.execs[key] = c
	}
	l.mu.Unlock()
	return c.Add(1)
}

// doubles returns how many keys ran more than once, naming the first few.
func (l *keyLedger) doubles(t *testing.T) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for k, c := range l.execs {
		if c.Load() > 1 {
			n++
			if n <= 5 {
				t.Logf("key %s executed %d times", k, c.Load())
			}
		}
	}
	return n
}

// soakCall is one call of a soak: its key and amount.
type soakCall struct {
	key    string
	amount int64
}

func (c soakCall) request() *testingv1.DoRequest {
	return &testingv1.DoRequest{Payload: c.key, Amount: c.amount}
}

// run makes calls calls from callers goroutines, call i with key
// "failover-i", counting answers, and returns the calls whose client gave
// up with a retryable error. Any other outcome fails the test.
func (l *keyLedger) run(ctx context.Context, t *testing.T, client testingv1.TestServiceClient, calls, callers int, answers *atomic.Int64) []soakCall {
	t.Helper()
	var (
		next   atomic.Int64
		mu     sync.Mutex
		gaveUp []soakCall
		wg     sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(calls) {
					return
				}
				c := soakCall{fmt.Sprintf("failover-%05d", i), i}
				resp, err := client.Do(ctx, c.request(), idempotency.WithKey(c.key))
				switch {
				case err == nil && resp.GetPayload() == c.key && resp.GetAmount() == i:
					answers.Add(1)
				case err != nil && retryableGiveUp(err):
					mu.Lock()
					gaveUp = append(gaveUp, c)
					mu.Unlock()
				default:
					t.Errorf("%s: %v, %v is neither its answer nor a retryable error", c.key, resp, err)
				}
			}
		})
	}
	wg.Wait()
	return gaveUp
}

// heal retries each given-up call with its key until it has its answer.
func (l *keyLedger) heal(ctx context.Context, t *testing.T, client testingv1.TestServiceClient, calls []soakCall) {
	t.Helper()
	for _, c := range calls {
		for {
			resp, err := client.Do(ctx, c.request(), idempotency.WithKey(c.key))
			if err == nil && resp.GetPayload() == c.key {
				break
			}
			if ctx.Err() != nil || (err != nil && !retryableGiveUp(err)) {
				t.Fatalf("retrying given-up %s: %v, %v", c.key, resp, err)
			}
		}
	}
}

// replayAll calls every key once more, after the soak, and returns how
// many ran their handler again instead of replaying.
func (l *keyLedger) replayAll(ctx context.Context, t *testing.T, client testingv1.TestServiceClient) int {
	t.Helper()
	l.mu.Lock()
	before := map[string]int64{}
	for k, c := range l.execs {
		before[k] = c.Load()
	}
	l.mu.Unlock()
	calls := make(chan soakCall)
	var wg sync.WaitGroup
	for range failoverCallers {
		wg.Go(func() {
			for c := range calls {
				resp, err := client.Do(ctx, c.request(), idempotency.WithKey(c.key))
				if err != nil || resp.GetPayload() != c.key {
					t.Errorf("final call of %s: %v, %v", c.key, resp, err)
				}
			}
		})
	}
	for i := range int64(failoverCalls) {
		calls <- soakCall{fmt.Sprintf("failover-%05d", i), i}
	}
	close(calls)
	wg.Wait()
	reran := 0
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, c := range l.execs {
		if c.Load() > before[k] {
			reran++
		}
	}
	return reran
}
