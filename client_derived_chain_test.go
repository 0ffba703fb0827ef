package idempotency_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

// chainLease is the upstream lease: how long the key of a handler that
// died stays in flight.
const chainLease = 3 * time.Second

// chainRig is a two-service chain. A client calls the upstream service,
// which runs on two servers, A and B, over one memory store, as two
// replicas behind a load balancer; its handler forwards the request to the
// downstream service, a server with the interceptor and a store of its
// own, through a client with the interceptor. A's handler dies after its
// downstream call: its store is cut, so nothing renews or completes its
// claim, and it blocks until the test ends, so its lease runs out.
type chainRig struct {
	down    *clientRig
	a, b    *testserver.Server
	client  testingv1.TestServiceClient
	release chan struct{}
}

func newChainRig(t *testing.T, downstreamOpts ...idempotency.ClientOption) *chainRig {
	t.Helper()
	r := &chainRig{down: newClientRig(t, rigConfig{}), release: make(chan struct{})}
	downstream := r.down.client(t, idempotency.UnaryClientInterceptor(downstreamOpts...))
	forward := func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return downstream.Do(ctx, req)
	}

	mem := memStore(t)
	storeA := faultstore.New(mem)
	dies := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		resp, err := forward(ctx, m, req)
		storeA.Down.Store(true) // the process is gone: no renewal, no completion
		<-r.release
		return resp, err
	}
	lease := idempotency.WithLease(chainLease)
	r.a = testserver.New(t, &testserver.Service{Handler: dies},
		grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(storeA, lease)))
	r.b = testserver.New(t, &testserver.Service{Handler: forward},
		grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(mem, lease)))
	// A bubble ends only when all its goroutines have: A's handler returns
	// and A stops when the test ends.
	t.Cleanup(func() { close(r.release); r.a.GRPC.GracefulStop() })

	r.client = r.a.Client(t, grpc.WithChainUnaryInterceptor(
		idempotency.UnaryClientInterceptor(
			idempotency.WithPerAttemptTimeout(time.Second),
			idempotency.WithMaxAttempts(10),
			idempotency.WithBackoff(noBackoff),
		),
		failover(r.b.Dial(t)),
	))
	return r
}

// failover sends the first attempt of each call to its own connection (A)
// and every later attempt to next (B), as a load balancer moves retries
// off a replica that stopped answering.
func failover(next *grpc.ClientConn) grpc.UnaryClientInterceptor {
	first := true
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if first {
			first = false
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		return next.Invoke(ctx, method, req, reply, opts...)
	}
}

// TestDerivedKeysAcrossCrash: the upstream handler calls downstream and
// dies before storing its outcome; after its lease the client's retry
// reaches the other upstream server, which runs the handler again. With
// WithDerivedKeys the downstream call of the re-run carries the key of the
// first run, so downstream replays its answer: its handler runs once and
// the client gets the downstream's original answer. Without it, the re-run
// mints a fresh key and downstream runs twice.
func TestDerivedKeysAcrossCrash(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		opts           []idempotency.ClientOption
		wantDownstream int64 // downstream executions, and the execution the client's answer reports
		wantSameKey    bool
	}{
		"WithDerivedKeys": {opts: []idempotency.ClientOption{idempotency.WithDerivedKeys()}, wantDownstream: 1, wantSameKey: true},
		"fresh keys":      {wantDownstream: 2},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				r := newChainRig(t, c.opts...)
				start := time.Now()
				resp, err := r.client.Do(t.Context(), &testingv1.DoRequest{Payload: "charge"})
				if err != nil {
					t.Fatalf("Do: %v", err)
				}
				if waited := time.Since(start); waited < chainLease {
					t.Fatalf("answered after %v, before A's lease (%v) ran out", waited, chainLease)
				}
				if a, b := r.a.Service.Executions(), r.b.Service.Executions(); a != 1 || b != 1 {
					t.Fatalf("upstream ran %d times on A and %d on B, want once on each", a, b)
				}
				if got := r.down.executions(); got != c.wantDownstream {
					t.Fatalf("downstream ran %d times, want %d", got, c.wantDownstream)
				}
				if resp.GetPayload() != "charge" || resp.GetExecution() != c.wantDownstream {
					t.Fatalf("answer %v, want downstream execution %d", resp, c.wantDownstream)
				}
				attempts := r.down.attempts.all()
				if len(attempts) != 2 || len(attempts[0].keys) != 1 || len(attempts[1].keys) != 1 {
					t.Fatalf("downstream saw %d calls (%v), want two with one key each", len(attempts), attempts)
				}
				if same := attempts[0].keys[0] == attempts[1].keys[0]; same != c.wantSameKey {
					t.Fatalf("downstream keys %q and %q: same %v, want %v", attempts[0].keys[0], attempts[1].keys[0], same, c.wantSameKey)
				}
			})
		})
	}
}
