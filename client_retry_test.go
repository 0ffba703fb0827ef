package idempotency_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The handler runs, but its response is lost on the way back: the retry
// carries the same key and gets the stored answer, not a second execution.
func TestClientLostResponse(t *testing.T) {
	t.Parallel()
	rig := testkit.Start(t, testkit.Config{Outer: []grpc.UnaryServerInterceptor{loseResponses(1)}})
	client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(idempotency.WithBackoff(noBackoff)))

	var header metadata.MD
	resp, err := client.Do(t.Context(), &testingv1.DoRequest{Payload: "charge", Amount: 42}, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetExecution() != 1 || resp.GetAmount() != 42 || rig.Service.Executions() != 1 {
		t.Fatalf("response %v after %d executions, want execution 1 of amount 42 and one execution", resp, rig.Service.Executions())
	}
	if got := header.Get(idempotency.ReplayedKey); !slices.Equal(got, []string{"true"}) {
		t.Fatalf("header %s = %q, want [true]", idempotency.ReplayedKey, got)
	}
	if attempts := rig.Attempts.All(); len(attempts) != 2 {
		t.Fatalf("server saw %d attempts, want 2", len(attempts))
	} else {
		wantOneKey(t, attempts)
	}
}

// A duplicate that finds the original in flight backs off on ABORTED with
// the in-use reason and ends with the original's answer.
func TestClientInFlightDuplicate(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	handler := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return testserver.Echo(ctx, m, req)
	}
	rig := testkit.Start(t, testkit.Config{Handler: handler, Options: []idempotency.ServerOption{idempotency.WithRetryAfter(20 * time.Millisecond)}})
	req := &testingv1.DoRequest{Payload: "transfer", Amount: 7}

	type result struct {
		resp *testingv1.DoResponse
		err  error
	}
	original := make(chan result, 1)
	holder := rig.ClientWith(t, idempotency.UnaryClientInterceptor(idempotency.WithoutRetry()))
	go func() {
		resp, err := holder.Do(t.Context(), req, idempotency.WithKey("k-dup"))
		original <- result{resp, err}
	}()
	<-started

	var mu sync.Mutex
	var retried []error
	var once sync.Once
	dup := rig.ClientWith(t, idempotency.UnaryClientInterceptor(
		idempotency.WithMaxAttempts(200),
		idempotency.WithBackoff(noBackoff),
		idempotency.WithOnRetry(func(_ context.Context, _ int, err error) {
			mu.Lock()
			retried = append(retried, err)
			mu.Unlock()
			once.Do(func() { close(release) }) // the original finishes only once the duplicate was turned away
		}),
	))
	resp, err := dup.Do(t.Context(), req, idempotency.WithKey("k-dup"))
	if err != nil {
		t.Fatal(err)
	}
	orig := <-original
	if orig.err != nil {
		t.Fatal(orig.err)
	}
	if resp.GetExecution() != orig.resp.GetExecution() || rig.Service.Executions() != 1 {
		t.Fatalf("duplicate got execution %d, original %d, handler ran %d times; want the original's answer and one execution",
			resp.GetExecution(), orig.resp.GetExecution(), rig.Service.Executions())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(retried) == 0 || status.Code(retried[0]) != codes.Aborted || clientReason(retried[0]) != idempotency.ErrKeyInUse.Reason {
		t.Fatalf("retried after %v, want ABORTED with %s first", retried, idempotency.ErrKeyInUse.Reason)
	}
	wantOneKey(t, rig.Attempts.All())
}

// Errors that a retry cannot fix, or that are unsafe to retry, come back
// after exactly one attempt.
func TestClientNoUnsafeRetries(t *testing.T) {
	t.Parallel()
	failWith := func(err error) testserver.HandlerFunc {
		return func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) { return nil, err }
	}
	tests := []struct {
		name       string
		handler    testserver.HandlerFunc
		fault      grpc.UnaryServerInterceptor
		below      grpc.UnaryClientInterceptor // chained after the interceptor under test
		method     string
		setup      bool // first make a call with the same key and another payload
		wantCode   codes.Code
		wantReason string
	}{
		{name: "key reused", setup: true, wantCode: codes.FailedPrecondition, wantReason: idempotency.ErrKeyReused.Reason},
		{name: "key invalid on the server", below: appendKey("k-second"), wantCode: codes.InvalidArgument, wantReason: idempotency.ErrKeyInvalid.Reason},
		{name: "key missing on the server", fault: stripKey, method: "Required", wantCode: codes.InvalidArgument, wantReason: idempotency.ErrKeyMissing.Reason},
		{name: "plain ABORTED", handler: failWith(status.Error(codes.Aborted, "conflict")), wantCode: codes.Aborted},
		{name: "ABORTED in use from another domain", handler: failWith(errorWith(codes.Aborted, "example.com", idempotency.ErrKeyInUse.Reason, time.Millisecond)), wantCode: codes.Aborted},
		{name: "ABORTED with another reason", handler: failWith(errorWith(codes.Aborted, idempotency.ErrorDomain, idempotency.ErrKeyReused.Reason, 0)), wantCode: codes.Aborted, wantReason: idempotency.ErrKeyReused.Reason},
		{name: "INTERNAL", handler: failWith(status.Error(codes.Internal, "bug")), wantCode: codes.Internal},
		{name: "RESOURCE_EXHAUSTED", handler: failWith(status.Error(codes.ResourceExhausted, "quota")), wantCode: codes.ResourceExhausted},
		{name: "RESOURCE_EXHAUSTED store full from another domain", handler: failWith(errorWith(codes.ResourceExhausted, "example.com", idempotency.ErrStoreFull.Reason, time.Millisecond)), wantCode: codes.ResourceExhausted},
		{name: "RESOURCE_EXHAUSTED with another reason", handler: failWith(errorWith(codes.ResourceExhausted, idempotency.ErrorDomain, idempotency.ErrKeyInUse.Reason, time.Millisecond)), wantCode: codes.ResourceExhausted, wantReason: idempotency.ErrKeyInUse.Reason},
		{name: "DEADLINE_EXCEEDED without a per-attempt timeout", handler: failWith(status.Error(codes.DeadlineExceeded, "slow backend")), wantCode: codes.DeadlineExceeded},
		{name: "UNAVAILABLE with a negative pushback", handler: failWithTrailer(codes.Unavailable, "-1"), wantCode: codes.Unavailable},
		{name: "UNAVAILABLE with a malformed pushback", handler: failWithTrailer(codes.Unavailable, "soon"), wantCode: codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := testkit.Start(t, testkit.Config{Handler: tt.handler, Outer: []grpc.UnaryServerInterceptor{tt.fault}})
			chain := []grpc.UnaryClientInterceptor{idempotency.UnaryClientInterceptor(idempotency.WithBackoff(noBackoff))}
			if tt.below != nil {
				chain = append(chain, tt.below)
			}
			client := rig.ClientWith(t, chain...)
			call := methodOf(client, tt.method)
			key := idempotency.WithKey("k-unsafe") // each case has its own store
			if tt.setup {
				if _, err := call(t.Context(), &testingv1.DoRequest{Payload: "first"}, key); err != nil {
					t.Fatal(err)
				}
			}
			before := len(rig.Attempts.All())

			_, err := call(t.Context(), &testingv1.DoRequest{Payload: "second"}, key)
			if status.Code(err) != tt.wantCode || clientReason(err) != tt.wantReason {
				t.Fatalf("err = %v (reason %q), want %v with reason %q", err, clientReason(err), tt.wantCode, tt.wantReason)
			}
			if n := len(rig.Attempts.All()) - before; n != 1 {
				t.Fatalf("server saw %d attempts, want exactly 1", n)
			}
		})
	}
}

func TestClientMaxAttemptsAndOnRetry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []idempotency.ClientOption
		want int
	}{
		{name: "default", want: defaultMaxAttempts},
		{name: "3", opts: []idempotency.ClientOption{idempotency.WithMaxAttempts(3)}, want: 3},
		{name: "1", opts: []idempotency.ClientOption{idempotency.WithMaxAttempts(1)}, want: 1},
		{name: "0 means 1", opts: []idempotency.ClientOption{idempotency.WithMaxAttempts(0)}, want: 1},
		{name: "WithoutRetry", opts: []idempotency.ClientOption{idempotency.WithoutRetry()}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			unavailable := errorWith(codes.Unavailable, idempotency.ErrorDomain, idempotency.ErrStoreUnavailable.Reason, 0)
			rig := testkit.Start(t, testkit.Config{Handler: func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				return nil, unavailable
			}})
			var hooks []int
			opts := append([]idempotency.ClientOption{
				idempotency.WithBackoff(noBackoff),
				idempotency.WithOnRetry(func(ctx context.Context, attempt int, err error) {
					if status.Code(err) != codes.Unavailable || ctx == nil {
						t.Errorf("OnRetry(%d) got err %v, want UNAVAILABLE", attempt, err)
					}
					hooks = append(hooks, attempt) // the hook runs on the calling goroutine
				}),
			}, tt.opts...)
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(opts...))

			_, err := client.Do(t.Context(), &testingv1.DoRequest{})
			if status.Code(err) != codes.Unavailable || clientReason(err) != idempotency.ErrStoreUnavailable.Reason {
				t.Fatalf("err = %v, want the last UNAVAILABLE with its details", err)
			}
			if n := len(rig.Attempts.All()); n != tt.want {
				t.Fatalf("server saw %d attempts, want %d", n, tt.want)
			}
			wantOneKey(t, rig.Attempts.All())
			var want []int
			for a := 2; a <= tt.want; a++ {
				want = append(want, a)
			}
			if !slices.Equal(hooks, want) {
				t.Fatalf("OnRetry called with attempts %v, want %v", hooks, want)
			}
		})
	}
}

// An attempt that outlives its per-attempt timeout is cut short and retried
// with the same key. The server opts out of detached handlers
// (WithCallerCancellation), so the first handler sees its caller leave and
// its error releases the claim; server_detach_test.go covers the default.
func TestClientPerAttemptTimeout(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	firstErr := make(chan error, 1)
	handler := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // hangs until the client gives up on the attempt
			firstErr <- ctx.Err()
			return nil, ctx.Err()
		}
		return testserver.Echo(ctx, m, req)
	}
	rig := testkit.Start(t, testkit.Config{Handler: handler, Options: []idempotency.ServerOption{
		idempotency.WithRetryAfter(10 * time.Millisecond), idempotency.WithCallerCancellation()}})
	client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(
		idempotency.WithPerAttemptTimeout(100*time.Millisecond),
		idempotency.WithMaxAttempts(100),
		idempotency.WithBackoff(noBackoff),
	))

	resp, err := client.Do(t.Context(), &testingv1.DoRequest{Payload: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-firstErr; !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("first attempt ended with %v, want its context done", err)
	}
	if resp.GetPayload() != "p" || rig.Service.Executions() != 2 {
		t.Fatalf("response %v after %d executions, want the second execution's answer", resp, rig.Service.Executions())
	}
	wantOneKey(t, rig.Attempts.All())
}

// appendKey is a client interceptor that adds a second key below the
// interceptor under test.
func appendKey(key string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, key), method, req, reply, cc, opts...)
	}
}

// stripKey is a server interceptor that drops the key before the
// idempotency interceptor sees it.
func stripKey(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	md.Delete(idempotency.MetadataKey)
	return handler(metadata.NewIncomingContext(ctx, md), req)
}

// failWithTrailer fails with code and a grpc-retry-pushback-ms trailer.
func failWithTrailer(code codes.Code, pushback string) testserver.HandlerFunc {
	return func(ctx context.Context, _ string, _ *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", pushback))
		return nil, status.Error(code, "pushback test")
	}
}

// go-grpc-middleware's backoff functions plug into WithBackoff as they are.
var _ = idempotency.WithBackoff(retry.BackoffExponentialWithJitter(100*time.Millisecond, 0.2))

// The key-only interceptor placed before go-grpc-middleware's retry: every
// attempt that layer makes carries the one key, so lost responses are
// replayed instead of run again. Placed after it, each attempt would mint
// its own key; the second case pins that hazard down.
func TestClientComposesWithMiddlewareRetry(t *testing.T) {
	t.Parallel()
	mwRetry := retry.UnaryClientInterceptor(
		retry.WithMax(5),
		retry.WithCodes(codes.Unavailable),
		retry.WithBackoff(retry.BackoffLinear(0)),
	)
	keyOnly := idempotency.UnaryClientInterceptor(idempotency.WithoutRetry())
	tests := []struct {
		name           string
		chain          []grpc.UnaryClientInterceptor
		wantExecutions int64
	}{
		{name: "key interceptor before retry", chain: []grpc.UnaryClientInterceptor{keyOnly, mwRetry}, wantExecutions: 1},
		{name: "key interceptor after retry", chain: []grpc.UnaryClientInterceptor{mwRetry, keyOnly}, wantExecutions: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := testkit.Start(t, testkit.Config{Outer: []grpc.UnaryServerInterceptor{loseResponses(2)}})
			client := rig.ClientWith(t, tt.chain...)

			var header metadata.MD
			_, err := client.Do(t.Context(), &testingv1.DoRequest{Payload: "p"}, grpc.Header(&header))
			if err != nil {
				t.Fatal(err)
			}
			attempts := rig.Attempts.All()
			if len(attempts) != 3 {
				t.Fatalf("server saw %d attempts, want 3 (two lost responses, then success)", len(attempts))
			}
			if got := rig.Service.Executions(); got != tt.wantExecutions {
				t.Fatalf("handler ran %d times, want %d", got, tt.wantExecutions)
			}
			if tt.wantExecutions > 1 {
				return // the hazard: a key per attempt
			}
			wantOneKey(t, attempts)
			if got := header.Get(idempotency.ReplayedKey); !slices.Equal(got, []string{"true"}) {
				t.Fatalf("header %s = %q, want [true]", idempotency.ReplayedKey, got)
			}
		})
	}
}

// Under grpc-go's native retryPolicy the transport resends the key set
// once by the key-only interceptor.
func TestClientComposesWithNativeRetryPolicy(t *testing.T) {
	t.Parallel()
	const serviceConfig = `{"methodConfig": [{
		"name": [{"service": "idempotency.testing.v1.TestService"}],
		"retryPolicy": {
			"maxAttempts": 4,
			"initialBackoff": "0.01s",
			"maxBackoff": "0.05s",
			"backoffMultiplier": 2,
			"retryableStatusCodes": ["UNAVAILABLE"]
		}
	}]}`
	// Attempt 1 runs the handler and loses its response, attempt 2 fails
	// before reaching the idempotency interceptor, attempt 3 gets the
	// replay. (A fault after a replay would come after its header, and
	// gRPC never retries once headers arrived.)
	var seen atomic.Int64
	fault := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		switch seen.Add(1) {
		case 1:
			_, _ = handler(ctx, req)
			return nil, status.Error(codes.Unavailable, "response lost")
		case 2:
			return nil, status.Error(codes.Unavailable, "not reached")
		}
		return handler(ctx, req)
	}
	rig := testkit.Start(t, testkit.Config{Outer: []grpc.UnaryServerInterceptor{fault}})
	client := rig.Server.Client(t,
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor(idempotency.WithoutRetry())),
	)

	var header metadata.MD
	resp, err := client.Do(t.Context(), &testingv1.DoRequest{Payload: "p"}, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	attempts := rig.Attempts.All()
	if len(attempts) != 3 {
		t.Fatalf("server saw %d attempts, want 3", len(attempts))
	}
	wantOneKey(t, attempts)
	if resp.GetExecution() != 1 || rig.Service.Executions() != 1 {
		t.Fatalf("response %v after %d executions, want one execution", resp, rig.Service.Executions())
	}
	if got := header.Get(idempotency.ReplayedKey); !slices.Equal(got, []string{"true"}) {
		t.Fatalf("header %s = %q, want [true]", idempotency.ReplayedKey, got)
	}
}

// A call refused because the store is full (RESOURCE_EXHAUSTED with
// IDEMPOTENCY_STORE_FULL) never ran its handler, so the client retries it
// with the same key after the server's RetryInfo delay, within
// WithMaxAttempts: once room is made the retry runs the handler once; while
// the store stays full the call ends after the last attempt with the
// server's answer.
func TestClientRetriesStoreFull(t *testing.T) {
	t.Parallel()
	const retryAfter = 20 * time.Millisecond
	tests := []struct {
		name      string
		makeRoom  bool
		wantCode  codes.Code
		wantExecs int64
	}{
		{name: "room made before the retry", makeRoom: true, wantCode: codes.OK, wantExecs: 1},
		{name: "store stays full", wantCode: codes.ResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mem := memStore(t, memorystore.WithMaxEntries(1))
			filler, err := mem.Claim(t.Context(), "filler", nil, time.Hour, store.ClaimOptions{})
			if err != nil || !filler.Won() {
				t.Fatalf("filling the store: won=%v err=%v", filler.Won(), err)
			}
			rig := testkit.Start(t, testkit.Config{Store: mem, Options: []idempotency.ServerOption{idempotency.WithRetryAfter(retryAfter)}})

			var retriedAfter []error
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(
				idempotency.WithBackoff(noBackoff),
				idempotency.WithMaxAttempts(3),
				idempotency.WithOnRetry(func(ctx context.Context, _ int, err error) {
					retriedAfter = append(retriedAfter, err) // the hook runs on the calling goroutine
					if tt.makeRoom && len(retriedAfter) == 1 {
						if err := mem.Release(ctx, "filler", filler.Token); err != nil {
							t.Errorf("making room: %v", err)
						}
					}
				}),
			))

			_, err = client.Do(t.Context(), &testingv1.DoRequest{Payload: "p"})
			if status.Code(err) != tt.wantCode {
				t.Fatalf("err = %v, want %v", err, tt.wantCode)
			}
			if err != nil && clientReason(err) != idempotency.ErrStoreFull.Reason {
				t.Fatalf("err = %v (reason %q), want reason %s", err, clientReason(err), idempotency.ErrStoreFull.Reason)
			}
			if len(retriedAfter) == 0 || status.Code(retriedAfter[0]) != codes.ResourceExhausted ||
				clientReason(retriedAfter[0]) != idempotency.ErrStoreFull.Reason {
				t.Fatalf("retried after %v, want RESOURCE_EXHAUSTED with %s", retriedAfter, idempotency.ErrStoreFull.Reason)
			}
			attempts := rig.Attempts.All()
			wantAttempts := 3
			if tt.makeRoom {
				wantAttempts = 2
			}
			if len(attempts) != wantAttempts {
				t.Fatalf("server saw %d attempts, want %d", len(attempts), wantAttempts)
			}
			wantOneKey(t, attempts)
			if gap := attempts[1].At.Sub(attempts[0].At); gap < retryAfter {
				t.Fatalf("retry came %v after the refusal, want at least the server's RetryInfo %v", gap, retryAfter)
			}
			if n := rig.Service.Executions(); n != tt.wantExecs {
				t.Fatalf("handler ran %d times, want %d", n, tt.wantExecs)
			}
		})
	}
}

// The retry waits at least as long as the server asked, through
// google.rpc.RetryInfo or the grpc-retry-pushback-ms trailer, or as long as
// the backoff when that is longer.
func TestClientWaitsForPushback(t *testing.T) {
	t.Parallel()
	const want = 300 * time.Millisecond
	constant := func(d time.Duration) func(context.Context, uint) time.Duration {
		return func(context.Context, uint) time.Duration { return d }
	}
	tests := []struct {
		name    string
		trailer string // grpc-retry-pushback-ms of the first answer, if any
		err     error  // the first answer
		backoff func(context.Context, uint) time.Duration
	}{
		{name: "RetryInfo", err: errorWith(codes.Aborted, idempotency.ErrorDomain, idempotency.ErrKeyInUse.Reason, want)},
		{name: "pushback trailer", trailer: "300", err: status.Error(codes.Unavailable, "busy")},
		{name: "trailer longer than RetryInfo", trailer: "300", err: errorWith(codes.Aborted, idempotency.ErrorDomain, idempotency.ErrKeyInUse.Reason, 10*time.Millisecond)},
		{name: "RetryInfo longer than trailer", trailer: "10", err: errorWith(codes.Unavailable, idempotency.ErrorDomain, idempotency.ErrStoreUnavailable.Reason, want)},
		{name: "backoff longer than pushback", trailer: "10", err: status.Error(codes.Unavailable, "busy"), backoff: constant(want)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var calls atomic.Int64
			handler := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				if calls.Add(1) > 1 {
					return testserver.Echo(ctx, m, req)
				}
				if tt.trailer != "" {
					_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", tt.trailer))
				}
				return nil, tt.err
			}
			rig := testkit.Start(t, testkit.Config{Handler: handler})
			backoff := tt.backoff
			if backoff == nil {
				backoff = noBackoff
			}
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(idempotency.WithBackoff(backoff)))

			if _, err := client.Do(t.Context(), &testingv1.DoRequest{}); err != nil {
				t.Fatal(err)
			}
			attempts := rig.Attempts.All()
			if len(attempts) != 2 {
				t.Fatalf("server saw %d attempts, want 2", len(attempts))
			}
			if gap := attempts[1].At.Sub(attempts[0].At); gap < want {
				t.Fatalf("retry came %v after the first attempt, want at least %v", gap, want)
			}
		})
	}
}

// Against the real in-flight rejection: every retry waits for the server's
// pushback, no attempt starts after the caller's deadline, and the call
// ends with the last rejection rather than sleeping into the deadline.
func TestClientPushbackStopsBeforeDeadline(t *testing.T) {
	t.Parallel()
	const pushback = 300 * time.Millisecond
	started, release := make(chan struct{}, 1), make(chan struct{})
	handler := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		started <- struct{}{}
		<-release
		return testserver.Echo(ctx, m, req)
	}
	rig := testkit.Start(t, testkit.Config{Handler: handler, Options: []idempotency.ServerOption{idempotency.WithRetryAfter(pushback)}})
	original := make(chan error, 1)
	holder := rig.ClientWith(t, idempotency.UnaryClientInterceptor(idempotency.WithoutRetry()))
	go func() {
		_, err := holder.Do(t.Context(), &testingv1.DoRequest{}, idempotency.WithKey("k-deadline"))
		original <- err
	}()
	<-started
	defer func() {
		close(release)
		if err := <-original; err != nil {
			t.Error(err)
		}
	}()

	client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(idempotency.WithBackoff(noBackoff), idempotency.WithMaxAttempts(100)))
	deadline := time.Now().Add(800 * time.Millisecond)
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	_, err := client.Do(ctx, &testingv1.DoRequest{}, idempotency.WithKey("k-deadline"))
	if status.Code(err) != codes.Aborted || clientReason(err) != idempotency.ErrKeyInUse.Reason {
		t.Fatalf("err = %v, want the last ABORTED with %s, returned before the deadline", err, idempotency.ErrKeyInUse.Reason)
	}

	attempts := rig.Attempts.All()[1:] // the first is the original's
	if len(attempts) < 2 {
		t.Fatalf("server saw %d attempts of the duplicate, want at least 2", len(attempts))
	}
	for i, a := range attempts {
		if !a.At.Before(deadline) {
			t.Fatalf("attempt %d started %v after the deadline", i+1, a.At.Sub(deadline))
		}
		if i > 0 {
			if gap := a.At.Sub(attempts[i-1].At); gap < pushback {
				t.Fatalf("attempt %d came %v after the one before, want at least the pushback %v", i+1, gap, pushback)
			}
		}
	}
}

// A wait that would end after the caller's deadline is not started: the
// last error comes back at once, with its details.
func TestClientDoesNotSleepPastDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		backoff    func(context.Context, uint) time.Duration
		wantCode   codes.Code
		wantReason string
	}{
		{
			name:     "backoff",
			err:      errorWith(codes.Unavailable, idempotency.ErrorDomain, idempotency.ErrStoreUnavailable.Reason, 0),
			backoff:  func(context.Context, uint) time.Duration { return time.Hour },
			wantCode: codes.Unavailable, wantReason: idempotency.ErrStoreUnavailable.Reason,
		},
		{
			name:     "pushback",
			err:      errorWith(codes.Aborted, idempotency.ErrorDomain, idempotency.ErrKeyInUse.Reason, time.Hour),
			backoff:  noBackoff,
			wantCode: codes.Aborted, wantReason: idempotency.ErrKeyInUse.Reason,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := testkit.Start(t, testkit.Config{Handler: func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				return nil, tt.err
			}})
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(idempotency.WithBackoff(tt.backoff)))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()

			// Sleeping would end the call with DEADLINE_EXCEEDED a minute from now.
			_, err := client.Do(ctx, &testingv1.DoRequest{})
			if status.Code(err) != tt.wantCode || clientReason(err) != tt.wantReason {
				t.Fatalf("err = %v, want %v with %s", err, tt.wantCode, tt.wantReason)
			}
			if n := len(rig.Attempts.All()); n != 1 {
				t.Fatalf("server saw %d attempts, want 1", n)
			}
		})
	}
}

// Cancelling the caller's context ends the backoff at once.
func TestClientStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	seen := make(chan struct{}, 1)
	rig := testkit.Start(t, testkit.Config{Handler: func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		seen <- struct{}{}
		return nil, status.Error(codes.Unavailable, "down")
	}})
	client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return time.Hour }),
	))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := client.Do(ctx, &testingv1.DoRequest{})
		done <- err
	}()
	<-seen
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("err = %v, want CANCELED", err)
	}
	if n := len(rig.Attempts.All()); n != 1 {
		t.Fatalf("server saw %d attempts, want 1", n)
	}
}
