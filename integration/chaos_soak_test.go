package idempotency_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// Soak shape: soakCalls logical calls from soakCallers goroutines.
const (
	soakCalls   = 10_000
	soakCallers = 32
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
// TestMain's goleak check, nothing leaks. The harness is soak_harness_test.go.
func TestChaosSoak(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), soakDeadline)
	defer cancel()
	insts := newSoakInstances(t, ctx)

	var execs executions
	handler := func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		key := metadata.ValueFromIncomingContext(ctx, idempotency.MetadataKey)
		if len(key) != 1 {
			return nil, status.Error(codes.Internal, "soak: call without exactly one key")
		}
		n := execs.add(key[0])
		return &testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount(), Execution: n}, nil
	}

	var conns [2]*grpc.ClientConn
	var first *testserver.Server
	for i, in := range insts {
		srv := testserver.New(t, &testserver.Service{Handler: handler},
			grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(in.store, in.options()...)))
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
	// call calls Do with key i and checks that the answer is its own.
	call := func(c testingv1.TestServiceClient, i int) (*soakProblem, error) {
		key := soakKey(i)
		resp, err := c.Do(ctx, &testingv1.DoRequest{Payload: key, Amount: int64(i)}, idempotency.WithKey(key))
		if err == nil && (resp.GetPayload() != key || resp.GetAmount() != int64(i) || resp.GetExecution() != 1) {
			return &soakProblem{kind: problemWrong, detail: fmt.Sprintf("%s: answer %v is not its own", key, resp)}, nil
		}
		return nil, err
	}

	faults := startChaos(8*time.Millisecond, cutNewLinks, storeProxies(insts)...)
	tally := runSoak(soakCalls, soakCallers, soakBudget, func(i int) (*soakProblem, error) { return call(client, i) })
	faults.Stop()

	tally.report(t, insts, soakKey)
	lost := leaseLostKeys(insts)
	doubles, rerun := execs.doubles(t, insts, lost)
	t.Logf("soak: %d calls from %d goroutines in %v: %d answers, %d give-ups %v, %d double executions, %d keys run again after a lost claim, %d wrong",
		tally.calls, soakCallers, tally.elapsed.Round(time.Millisecond), tally.answers, len(tally.gaveUp), tally.giveUps(), doubles, rerun, len(tally.problems))
	t.Logf("faults: %v", faults)
	t.Logf("instance A outcomes: %v", &insts[0].observed)
	t.Logf("instance B outcomes: %v", &insts[1].observed)
	if doubles > 0 || len(tally.problems) > 0 {
		t.FailNow()
	}
	if tally.answers == 0 || faults.cuts() == 0 {
		t.Fatal("the soak proved nothing: no answers or no cuts")
	}

	// The faults are over: each given-up call, retried with its key, ends
	// with one execution (its first, or a replay of it).
	patient := dial(idempotency.WithMaxAttempts(200),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 10 * time.Millisecond }))
	if err := tally.heal(soakCallers, func(i int) error {
		if p, err := call(patient, i); p != nil || err != nil {
			return fmt.Errorf("%v, %v; want its one execution", p, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if executed := execs.once(t, insts, leaseLostKeys(insts)); executed != tally.calls {
		t.Fatalf("%d keys executed exactly once (or again after a lost claim), want all %d", executed, tally.calls)
	}
}

// soakKey is the key of call i.
func soakKey(i int) string { return fmt.Sprintf("soak-%05d", i) }
