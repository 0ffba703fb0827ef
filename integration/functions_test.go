package idempotency_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// functionStores returns a constructor per store over the network: the
// Redis store on a redis-server of its own, and the PostgreSQL and MySQL
// stores on a table of their own.
func functionStores() map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"redis": func(t *testing.T) store.Store { return redisstore.New(redistest.StartServer(t).Client()) },
		"postgres": func(t *testing.T) store.Store {
			l := newPGLedger(t)
			s := postgresstore.New(l.admin, postgresstore.WithTable(l.records()), postgresstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"mysql": mysqlStore,
	}
}

// Do and Once over the real stores: the function runs once per key across
// goroutines and two Server values, every call gets its response byte for
// byte, another request with the key is refused, a deterministic error is
// replayed, a retryable one releases the key, and Once reports whether it
// ran.
func TestFunctionsOverStores(t *testing.T) {
	t.Parallel()
	for name, newStore := range functionStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := newStore(t)
			servers := [2]*idempotency.Server{}
			for i := range servers {
				servers[i] = idempotency.NewServer(st, idempotency.WithWaitForInFlight(time.Minute))
			}
			ctx := t.Context()
			req := &testingv1.DoRequest{Payload: "p", Amount: 9}
			var runs atomic.Int64
			fn := func(context.Context) (*testingv1.DoResponse, error) {
				return &testingv1.DoResponse{Payload: "p", Execution: runs.Add(1), Blob: []byte{0, 0xff}}, nil
			}
			const callers = 16
			answers := make([][]byte, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, _, err := idempotency.Do(ctx, servers[i%2], "payments.charge", "k-1", req, fn)
					if err != nil {
						t.Errorf("call %d: %v", i, err)
						return
					}
					answers[i], _ = proto.Marshal(resp)
				}()
			}
			wg.Wait()
			if runs.Load() != 1 {
				t.Fatalf("fn ran %d times, want 1", runs.Load())
			}
			for i := range answers {
				if string(answers[i]) != string(answers[0]) {
					t.Fatalf("call %d answered %x, want %x", i, answers[i], answers[0])
				}
			}
			if _, _, err := idempotency.Do(ctx, servers[0], "payments.charge", "k-1", &testingv1.DoRequest{Amount: 10}, fn); !errors.Is(err, idempotency.ErrKeyReused) {
				t.Fatalf("another request: %v, want ErrKeyReused", err)
			}

			stored := status.Error(codes.FailedPrecondition, "account closed")
			for i, want := range []bool{true, false} {
				ran, err := idempotency.Once(ctx, servers[i], "orders.ship", "msg-1", nil, func(context.Context) error { return stored })
				if ran != want || status.Code(err) != codes.FailedPrecondition {
					t.Fatalf("deterministic error, call %d: ran %v, %v", i+1, ran, err)
				}
			}
			for i, want := range []bool{true, true, false} {
				ran, err := idempotency.Once(ctx, servers[i%2], "orders.ship", "msg-2", nil, func(context.Context) error {
					if i == 0 {
						return status.Error(codes.Unavailable, "broker down")
					}
					return nil
				})
				if ran != want || (i > 0 && err != nil) {
					t.Fatalf("retryable error, call %d: ran %v, %v; want ran %v", i+1, ran, err, want)
				}
			}
		})
	}
}

// A Once on its function's context, kept past the run (by a goroutine the
// function started), gets the answer decision 97 gives on every store:
// a replay of the stored outcome, though that context ended with the run;
// after a retryable error released the key, the context error, and
// nothing runs. The store is called on a context that does not end with
// the run (the memory store, which reads no context, answered so already).
func TestFunctionsKeptContext(t *testing.T) {
	t.Parallel()
	for name, newStore := range functionStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := idempotency.NewServer(newStore(t))
			for i, tc := range []struct {
				released bool
				want     error
			}{{false, nil}, {true, context.Canceled}} {
				key := "k-" + strconv.Itoa(i)
				var kept context.Context
				var runs atomic.Int64
				_, _ = idempotency.Once(t.Context(), srv, "orders.ship", key, nil, func(ctx context.Context) error {
					kept = ctx
					runs.Add(1)
					if tc.released {
						return status.Error(codes.Unavailable, "broker down")
					}
					return nil
				})
				ran, err := idempotency.Once(kept, srv, "orders.ship", key, nil, func(context.Context) error { runs.Add(1); return nil })
				if ran || !errors.Is(err, tc.want) || (tc.want == nil && err != nil) || runs.Load() != 1 {
					t.Fatalf("released %v: Once on the kept context: ran %v, %v, runs %d; want %v and no run", tc.released, ran, err, runs.Load(), tc.want)
				}
			}
		})
	}
}
