package idempotency_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// limitBackends returns a constructor per store: those of storeBackends
// and a PostgreSQL and a MySQL store on a table of their own.
func limitBackends() map[string]func(t *testing.T) store.Store {
	backends := storeBackends()
	backends["postgres"] = func(t *testing.T) store.Store {
		s := postgresstore.New(pgtest.Pool(t, 2), postgresstore.WithTable(newPGLedger(t).records()), postgresstore.WithSweepInterval(0))
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	backends["mysql"] = mysqlStore
	return backends
}

// WithRetention(math.MaxInt64) keeps the outcome: every retry replays it,
// on every store. Before the ceiling, Redis refused the PX of the
// completion and PostgreSQL wrote the completed row already expired, so
// each retry ran the handler again.
func TestRetentionMaxInt64Replays(t *testing.T) {
	t.Parallel()
	for name, newStore := range limitBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := testserver.New(t, &testserver.Service{}, grpc.ChainUnaryInterceptor(
				idempotency.UnaryServerInterceptor(newStore(t), idempotency.WithRetention(math.MaxInt64))))
			client := srv.Client(t)
			ctx := withKey(t.Context(), "k-kept")
			for i := range 3 {
				var header metadata.MD
				resp, err := client.Do(ctx, &testingv1.DoRequest{Payload: "kept"}, grpc.Header(&header))
				if err != nil || resp.GetExecution() != 1 {
					t.Fatalf("call %d = %v, %v; want the answer of execution 1", i+1, resp, err)
				}
				wantReplayed(t, header, i > 0)
			}
			if n := srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}

// WithLease(math.MaxInt64) holds the key while the handler runs: a
// duplicate is rejected as in flight, on every store. Before the ceiling,
// PostgreSQL wrote the claim already expired (the duplicate ran beside the
// original) and Redis refused the claim's PX (every call failed as store
// unavailable).
func TestLeaseMaxInt64HoldsKey(t *testing.T) {
	t.Parallel()
	for name, newStore := range limitBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			started, release := make(chan struct{}), make(chan struct{})
			var runs atomic.Int64
			hold := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				if runs.Add(1) == 1 { // a duplicate run answers at once
					close(started)
					<-release
				}
				return testserver.Echo(ctx, m, req)
			}
			srv := testserver.New(t, &testserver.Service{Handler: hold}, grpc.ChainUnaryInterceptor(
				idempotency.UnaryServerInterceptor(newStore(t), idempotency.WithLease(math.MaxInt64))))
			client := srv.Client(t)
			ctx := withKey(t.Context(), "k-held")
			req := &testingv1.DoRequest{Payload: "held"}

			done := make(chan error, 1)
			go func() {
				_, err := client.Do(ctx, req)
				done <- err
			}()
			select {
			case <-started:
			case err := <-done:
				t.Fatalf("the first call returned %v before its handler started", err)
			}
			_, err := client.Do(ctx, req)
			close(release)
			wantReason(t, err, codes.Aborted, idempotency.ErrKeyInUse.Reason)
			if err := <-done; err != nil {
				t.Fatalf("the first call: %v", err)
			}
			var header metadata.MD
			if resp, err := client.Do(ctx, req, grpc.Header(&header)); err != nil || resp.GetExecution() != 1 {
				t.Fatalf("retry = %v, %v; want the answer of execution 1", resp, err)
			}
			wantReplayed(t, header, true)
			if n := srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}
