package idempotency_test

import (
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// TestReplayCacheOverStores: with WithReplayCache, a replay of a key the
// server's cache holds makes no store call, on every store. Server A runs
// the call and caches its own outcome; server B, over the same store,
// replays it from the store once and from its cache after that.
func TestReplayCacheOverStores(t *testing.T) {
	t.Parallel()
	for name, newStore := range limitBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fs := faultstore.New(newStore(t))
			svc := &testserver.Service{}
			clients := [2]testingv1.TestServiceClient{}
			for i := range clients {
				s := idempotency.NewServer(fs, idempotency.WithReplayCache(100, 1<<20, time.Hour))
				clients[i] = testserver.New(t, svc, grpc.ChainUnaryInterceptor(s.UnaryServerInterceptor())).Client(t)
			}
			ctx := withKey(t.Context(), "k-cached")
			req := &testingv1.DoRequest{Payload: "cached", Amount: 7}
			for i, step := range []struct {
				server int
				calls  int // store calls the step makes
			}{
				{0, 2}, // claim, complete
				{0, 0},
				{1, 1}, // claim: the completed entry
				{1, 0},
				{0, 0},
			} {
				before := len(fs.Calls())
				var header metadata.MD
				resp, err := clients[step.server].Do(ctx, req, grpc.Header(&header))
				if err != nil || resp.GetExecution() != 1 || resp.GetPayload() != "cached" {
					t.Fatalf("step %d = %v, %v; want the answer of execution 1", i, resp, err)
				}
				wantReplayed(t, header, i > 0)
				if calls := fs.Calls()[before:]; len(calls) != step.calls {
					t.Fatalf("step %d on server %d made store calls %v, want %d", i, step.server, calls, step.calls)
				}
			}
			if n := svc.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}
