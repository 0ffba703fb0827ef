package idempotency_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

// The handler runs, but its response is lost on the way back: the retry
// carries the same key and gets the stored answer, not a second execution.
func TestClientLostResponse(t *testing.T) {
	t.Parallel()
	rig := newClientRig(t, rigConfig{fault: loseResponses(1)})
	client := rig.client(t, idempotency.UnaryClientInterceptor(idempotency.WithBackoff(noBackoff)))

	var header metadata.MD
	resp, err := client.Do(t.Context(), &testingv1.DoRequest{Payload: "charge", Amount: 42}, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetExecution() != 1 || resp.GetAmount() != 42 || rig.executions() != 1 {
		t.Fatalf("response %v after %d executions, want execution 1 of amount 42 and one execution", resp, rig.executions())
	}
	if got := header.Get(idempotency.ReplayedKey); !slices.Equal(got, []string{"true"}) {
		t.Fatalf("header %s = %q, want [true]", idempotency.ReplayedKey, got)
	}
	if attempts := rig.attempts.all(); len(attempts) != 2 {
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
	rig := newClientRig(t, rigConfig{handler: handler, server: []idempotency.ServerOption{idempotency.WithRetryAfter(20 * time.Millisecond)}})
	req := &testingv1.DoRequest{Payload: "transfer", Amount: 7}

	type result struct {
		resp *testingv1.DoResponse
		err  error
	}
	original := make(chan result, 1)
	holder := rig.client(t, idempotency.UnaryClientInterceptor(idempotency.WithoutRetry()))
	go func() {
		resp, err := holder.Do(t.Context(), req, idempotency.WithKey("k-dup"))
		original <- result{resp, err}
	}()
	<-started

	var mu sync.Mutex
	var retried []error
	var once sync.Once
	dup := rig.client(t, idempotency.UnaryClientInterceptor(
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
	if resp.GetExecution() != orig.resp.GetExecution() || rig.executions() != 1 {
		t.Fatalf("duplicate got execution %d, original %d, handler ran %d times; want the original's answer and one execution",
			resp.GetExecution(), orig.resp.GetExecution(), rig.executions())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(retried) == 0 || status.Code(retried[0]) != codes.Aborted || clientReason(retried[0]) != idempotency.ErrKeyInUse.Reason {
		t.Fatalf("retried after %v, want ABORTED with %s first", retried, idempotency.ErrKeyInUse.Reason)
	}
	wantOneKey(t, rig.attempts.all())
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
			rig := newClientRig(t, rigConfig{handler: tt.handler, fault: tt.fault})
			chain := []grpc.UnaryClientInterceptor{idempotency.UnaryClientInterceptor(idempotency.WithBackoff(noBackoff))}
			if tt.below != nil {
				chain = append(chain, tt.below)
			}
			client := rig.client(t, chain...)
			call := methodOf(client, tt.method)
			key := idempotency.WithKey("k-unsafe") // each case has its own store
			if tt.setup {
				if _, err := call(t.Context(), &testingv1.DoRequest{Payload: "first"}, key); err != nil {
					t.Fatal(err)
				}
			}
			before := len(rig.attempts.all())

			_, err := call(t.Context(), &testingv1.DoRequest{Payload: "second"}, key)
			if status.Code(err) != tt.wantCode || clientReason(err) != tt.wantReason {
				t.Fatalf("err = %v (reason %q), want %v with reason %q", err, clientReason(err), tt.wantCode, tt.wantReason)
			}
			if n := len(rig.attempts.all()) - before; n != 1 {
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
			rig := newClientRig(t, rigConfig{handler: func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
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
			client := rig.client(t, idempotency.UnaryClientInterceptor(opts...))

			_, err := client.Do(t.Context(), &testingv1.DoRequest{})
			if status.Code(err) != codes.Unavailable || clientReason(err) != idempotency.ErrStoreUnavailable.Reason {
				t.Fatalf("err = %v, want the last UNAVAILABLE with its details", err)
			}
			if n := len(rig.attempts.all()); n != tt.want {
				t.Fatalf("server saw %d attempts, want %d", n, tt.want)
			}
			wantOneKey(t, rig.attempts.all())
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
	rig := newClientRig(t, rigConfig{handler: handler, server: []idempotency.ServerOption{
		idempotency.WithRetryAfter(10 * time.Millisecond), idempotency.WithCallerCancellation()}})
	client := rig.client(t, idempotency.UnaryClientInterceptor(
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
	if resp.GetPayload() != "p" || rig.executions() != 2 {
		t.Fatalf("response %v after %d executions, want the second execution's answer", resp, rig.executions())
	}
	wantOneKey(t, rig.attempts.all())
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
