package migratestore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
)

// TestMoveOverServers follows the procedure of docs/operations.md over real
// gRPC servers, from one memory store to another (the integration module
// runs it from one Redis prefix to another).
func TestMoveOverServers(t *testing.T) {
	t.Parallel()
	testkit.MoveOverServers(t, newMemory(t), newMemory(t))
}

// TestMoveOffMemory: what docs/operations.md says moving off the memory
// store keeps. Across a restart, nothing: the adapter over the new
// process's memory store finds nothing of the old process's, and a key
// completed before the restart runs its handler again. A drain keeps the
// keys while the process lives: with the handler refusing new work with
// UNAVAILABLE (retryable, so its claim is released and nothing stored), a
// retry of a key completed before is still replayed from memory, and a
// refused call, retried with its key once the process runs on a durable
// store, runs there once.
func TestMoveOffMemory(t *testing.T) {
	t.Parallel()
	type fixture struct {
		runs     atomic.Int64
		draining atomic.Bool
	}
	newService := func(t *testing.T) (*fixture, func(srv *idempotency.Server, key string) (string, bool, error)) {
		f := &fixture{}
		charge := func(context.Context) (*wrapperspb.StringValue, error) {
			if f.draining.Load() {
				return nil, status.Error(codes.Unavailable, "draining: retry later with the same key")
			}
			f.runs.Add(1)
			return wrapperspb.String("charged"), nil
		}
		do := func(srv *idempotency.Server, key string) (string, bool, error) {
			resp, replayed, err := idempotency.Do(t.Context(), srv, "payments.charge", key, wrapperspb.Int64(4200), charge)
			return resp.GetValue(), replayed, err
		}
		return f, do
	}
	server := func(t *testing.T, s store.Store) *idempotency.Server {
		srv := idempotency.NewServer(s)
		t.Cleanup(func() { _ = srv.Close() })
		return srv
	}

	t.Run("restart onto the adapter", func(t *testing.T) {
		t.Parallel()
		f, do := newService(t)
		before := server(t, newMemory(t)) // the process before the deploy
		_, _, err := do(before, "evt_1")
		must(t, err)
		// The deploy starts a new process: its memory store is a new one,
		// and the adapter has nothing to move from it.
		durable := newMemory(t) // stands for Redis or PostgreSQL
		after := server(t, migratestore.New(newMemory(t), durable))
		if _, replayed, err := do(after, "evt_1"); err != nil || replayed || f.runs.Load() != 2 {
			t.Fatalf("retry after the restart: replayed %v, %v, %d runs; want the handler run again (memory keeps nothing)", replayed, err, f.runs.Load())
		}
	})

	t.Run("drain, then restart onto a durable store", func(t *testing.T) {
		t.Parallel()
		f, do := newService(t)
		before := server(t, newMemory(t))
		_, _, err := do(before, "evt_1")
		must(t, err)
		f.draining.Store(true) // a runtime switch, not a restart
		if _, replayed, err := do(before, "evt_1"); err != nil || !replayed {
			t.Fatalf("retry of a completed key while draining: replayed %v, %v; want the replay", replayed, err)
		}
		if _, _, err := do(before, "evt_2"); status.Code(err) != codes.Unavailable {
			t.Fatalf("new key while draining: %v, want UNAVAILABLE", err)
		}
		// The retry window of the clients has passed; the deploy starts
		// the process on a durable store, and evt_2's client retries.
		f.draining.Store(false)
		after := server(t, newMemory(t))
		for i, want := range []bool{false, true} {
			if _, replayed, err := do(after, "evt_2"); err != nil || replayed != want {
				t.Fatalf("evt_2 after the deploy, call %d: replayed %v, %v; want %v", i+1, replayed, err, want)
			}
		}
		if n := f.runs.Load(); n != 2 {
			t.Fatalf("handler ran %d times for 2 keys", n)
		}
	})
}
