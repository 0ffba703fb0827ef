package idempotency_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

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
			rig := newClientRig(t, rigConfig{fault: loseResponses(2)})
			client := rig.client(t, tt.chain...)

			var header metadata.MD
			_, err := client.Do(t.Context(), &testingv1.DoRequest{Payload: "p"}, grpc.Header(&header))
			if err != nil {
				t.Fatal(err)
			}
			attempts := rig.attempts.all()
			if len(attempts) != 3 {
				t.Fatalf("server saw %d attempts, want 3 (two lost responses, then success)", len(attempts))
			}
			if got := rig.executions(); got != tt.wantExecutions {
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
	rig := newClientRig(t, rigConfig{fault: fault})
	client := rig.srv.Client(t,
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor(idempotency.WithoutRetry())),
	)

	var header metadata.MD
	resp, err := client.Do(t.Context(), &testingv1.DoRequest{Payload: "p"}, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	attempts := rig.attempts.all()
	if len(attempts) != 3 {
		t.Fatalf("server saw %d attempts, want 3", len(attempts))
	}
	wantOneKey(t, attempts)
	if resp.GetExecution() != 1 || rig.executions() != 1 {
		t.Fatalf("response %v after %d executions, want one execution", resp, rig.executions())
	}
	if got := header.Get(idempotency.ReplayedKey); !slices.Equal(got, []string{"true"}) {
		t.Fatalf("header %s = %q, want [true]", idempotency.ReplayedKey, got)
	}
}
