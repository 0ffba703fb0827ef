package idempotency_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestDerivedKey: the key a handler derives differs by tenant, client key,
// method and label, and stays the same when the handler runs again for the
// same key (here after a retryable error released its claim); it is always
// a valid key; outside a claim there is none.
func TestDerivedKey(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	runs := map[string][]string{} // call/label -> derived keys, one per run
	failFirst := map[string]bool{"retried": true}
	handler := func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, label := range []string{"psp", "mail"} {
			key, ok := idempotency.DerivedKey(ctx, label)
			if !ok {
				key = "none"
			}
			runs[req.GetPayload()+"/"+label] = append(runs[req.GetPayload()+"/"+label], key)
		}
		if failFirst[req.GetPayload()] {
			failFirst[req.GetPayload()] = false
			return nil, status.Error(codes.Unavailable, "try again")
		}
		return &testingv1.DoResponse{}, nil
	}
	f := newFixture(t, handler, idempotency.WithScope(func(ctx context.Context) (string, error) {
		return metadata.ValueFromIncomingContext(ctx, "tenant")[0], nil
	}))
	calls := []struct {
		payload, tenant, key, method string
	}{
		{"reference", "t1", "k", "Do"},
		{"another tenant", "t2", "k", "Do"},
		{"another key", "t1", "k2", "Do"},
		{"another method", "t1", "k", "Required"},
		{"retried", "t1", "k4", "Do"},
		{"retried", "t1", "k4", "Do"},
		{"no claim", "t1", "k5", "Disabled"},
	}
	for _, c := range calls {
		ctx := metadata.AppendToOutgoingContext(withKey(t.Context(), c.key), "tenant", c.tenant)
		_, err := methodOf(f.Client, c.method)(ctx, &testingv1.DoRequest{Payload: c.payload})
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: %v", c.payload, err)
		}
	}

	if len(runs) != 12 {
		t.Fatalf("the handler derived keys for %d call/label pairs, want 12", len(runs))
	}
	seen := map[string]string{}
	for run, keys := range runs {
		payload, _, _ := strings.Cut(run, "/")
		switch {
		case payload == "no claim":
			if len(keys) != 1 || keys[0] != "none" {
				t.Errorf("without a claim: %q, want no derived key", keys)
			}
			continue
		case payload == "retried":
			if len(keys) != 2 || keys[0] != keys[1] {
				t.Errorf("runs of one key derived %q, want the same key twice", keys)
			}
		case len(keys) != 1:
			t.Errorf("%s: the handler ran %d times, want once", run, len(keys))
		}
		if err := idempotency.ValidateKey(keys[0]); err != nil {
			t.Errorf("%s: derived key %q: %v", run, keys[0], err)
		}
		if other, dup := seen[keys[0]]; dup {
			t.Errorf("%s and %s derived the same key", run, other)
		}
		seen[keys[0]] = run
	}
	if _, ok := idempotency.DerivedKey(t.Context(), "psp"); ok {
		t.Error("DerivedKey outside a handler reported a key")
	}
}

// TestDerivedKeysPerCall: with WithDerivedKeys, each call a claimed handler
// makes to a method gets the key derived from the method and the call's
// ordinal, so two calls get two keys; a key given with WithKey or in the
// metadata wins and takes no ordinal; a method that gets no key, and a
// handler without a claim (its key from the generator), are unaffected.
func TestDerivedKeysPerCall(t *testing.T) {
	t.Parallel()
	down := testkit.Start(t, testkit.Config{})
	downstream := down.ClientWith(t, idempotency.UnaryClientInterceptor(
		idempotency.WithDerivedKeys(),
		idempotency.WithKeyGenerator(func() string { return "generated" }),
	))
	var want []string // the keys downstream should see, in order
	handler := func(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if method == testingv1.TestService_Disabled_FullMethodName { // no claim
			want = append(want, "generated")
			return downstream.Do(ctx, req)
		}
		derived := func(n string) string {
			k, _ := idempotency.DerivedKey(ctx, testingv1.TestService_Do_FullMethodName+"#"+n)
			return k
		}
		steps := []struct {
			call func() error
			key  string
		}{
			{func() error { _, err := downstream.Do(ctx, req); return err }, derived("1")},
			{func() error { _, err := downstream.Do(ctx, req); return err }, derived("2")},
			{func() error { _, err := downstream.Do(ctx, req, idempotency.WithKey("explicit")); return err }, "explicit"},
			{func() error {
				_, err := downstream.Do(metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, "in-metadata"), req)
				return err
			}, "in-metadata"},
			{func() error { _, err := downstream.Do(ctx, req); return err }, derived("3")},
			{func() error { _, err := downstream.Read(ctx, req); return err }, ""},
		}
		for _, s := range steps {
			want = append(want, s.key)
			if err := s.call(); err != nil {
				return nil, err
			}
		}
		return &testingv1.DoResponse{}, nil
	}
	up := newFixture(t, handler)
	if _, err := up.Client.Do(withKey(t.Context(), "order-1"), &testingv1.DoRequest{Payload: "charge"}); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if _, err := up.Client.Disabled(t.Context(), &testingv1.DoRequest{Payload: "charge"}); err != nil {
		t.Fatalf("Disabled: %v", err)
	}

	attempts := down.Attempts.All()
	if len(attempts) != len(want) {
		t.Fatalf("downstream saw %d calls, want %d", len(attempts), len(want))
	}
	for i, a := range attempts {
		switch {
		case want[i] == "" && len(a.Keys) != 0:
			t.Errorf("call %d (%s) carried keys %q, want none", i+1, a.Method, a.Keys)
		case want[i] != "" && (len(a.Keys) != 1 || a.Keys[0] != want[i]):
			t.Errorf("call %d (%s) carried keys %q, want %q", i+1, a.Method, a.Keys, want[i])
		}
	}
	if want[0] == want[1] || want[0] == want[4] || want[1] == want[4] {
		t.Errorf("calls 1, 2 and 5 to one method derived keys %q, %q and %q, want three keys", want[0], want[1], want[4])
	}
	if got := down.Service.Executions(); got != int64(len(want)) {
		t.Errorf("downstream ran %d times, want %d (one per call)", got, len(want))
	}
}

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
	down    *fixture
	a, b    *testserver.Server
	client  testingv1.TestServiceClient
	release chan struct{}
}

func newChainRig(t *testing.T, downstreamOpts ...idempotency.ClientOption) *chainRig {
	t.Helper()
	r := &chainRig{down: testkit.Start(t, testkit.Config{}), release: make(chan struct{})}
	downstream := r.down.ClientWith(t, idempotency.UnaryClientInterceptor(downstreamOpts...))
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
				if got := r.down.Service.Executions(); got != c.wantDownstream {
					t.Fatalf("downstream ran %d times, want %d", got, c.wantDownstream)
				}
				if resp.GetPayload() != "charge" || resp.GetExecution() != c.wantDownstream {
					t.Fatalf("answer %v, want downstream execution %d", resp, c.wantDownstream)
				}
				attempts := r.down.Attempts.All()
				if len(attempts) != 2 || len(attempts[0].Keys) != 1 || len(attempts[1].Keys) != 1 {
					t.Fatalf("downstream saw %d calls (%v), want two with one key each", len(attempts), attempts)
				}
				if same := attempts[0].Keys[0] == attempts[1].Keys[0]; same != c.wantSameKey {
					t.Fatalf("downstream keys %q and %q: same %v, want %v", attempts[0].Keys[0], attempts[1].Keys[0], same, c.wantSameKey)
				}
			})
		})
	}
}
