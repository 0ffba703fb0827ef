package idempotency_test

import (
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// purgeStore is a store that is an Inspector and an Invalidator, as every
// store of this repository is.
type purgeStore interface {
	store.Store
	store.Inspector
	store.Invalidator
}

// purgeBackends returns, per networked store, a constructor of store
// instances over one backend: each call opens a client or pool of its
// own, as each server of a service has.
func purgeBackends() map[string]func(t *testing.T) func() purgeStore {
	return map[string]func(t *testing.T) func() purgeStore{
		"redis": func(t *testing.T) func() purgeStore {
			srv := redistest.StartServer(t)
			return func() purgeStore { return redisstore.New(srv.Client()) }
		},
		"postgres": func(t *testing.T) func() purgeStore {
			table := newPGLedger(t).records()
			return func() purgeStore {
				s := postgresstore.New(pgtest.Pool(t, 2), postgresstore.WithTable(table), postgresstore.WithSweepInterval(0))
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		},
		"mysql": func(t *testing.T) func() purgeStore {
			table := newMyLedger(t).records()
			return func() purgeStore {
				s := mysqlstore.New(mysqltest.DB(t, 2), mysqlstore.WithTable(table), mysqlstore.WithSweepInterval(0),
					mysqlstore.WithInvalidationInterval(20*time.Millisecond))
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		},
	}
}

// lastEvent returns the last event recorded.
func lastEvent(t *testing.T, ev *events) idempotency.Event {
	t.Helper()
	all := ev.All()
	if len(all) == 0 {
		t.Fatal("no event")
	}
	return all[len(all)-1]
}

// TestReplayCachePurgeOverStores: two servers with replay caches, each
// over a store instance of its own on one Redis, one PostgreSQL or one
// MySQL table. Both replay a key from their caches; the key is purged
// through B's store instance, and the store tells both servers (Redis
// pub/sub, PostgreSQL NOTIFY, MySQL's purge log): A's next call finds the key free and runs the handler again,
// and B's replays A's new outcome from the store, not its own cached one.
func TestReplayCachePurgeOverStores(t *testing.T) {
	t.Parallel()
	for name, backend := range purgeBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			open := backend(t)
			stA, stB := open(), open()
			cache := idempotency.WithReplayCache(100, 1<<20, time.Hour)
			watchA, watchB := testkit.NewPurgeWatch(stA, stA), testkit.NewPurgeWatch(stB, stB)
			a := testkit.Serve(t, testkit.Config{Store: watchA, Options: []idempotency.ServerOption{cache}})
			b := testkit.Serve(t, testkit.Config{Store: watchB, Options: []idempotency.ServerOption{cache}})
			watchA.WaitSubscribed(t, 1)
			watchB.WaitSubscribed(t, 1)

			ctx := withKey(t.Context(), "k-purged")
			req := &testingv1.DoRequest{Payload: "charge"}
			for _, srv := range []*testkit.Rig{a, a, b, b} {
				if _, err := srv.Client(t).Do(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			for name, srv := range map[string]*testkit.Rig{"A": a, "B": b} {
				if e := lastEvent(t, srv.Events); e.Decision != idempotency.DecisionReplayed || !e.Cached {
					t.Fatalf("%s's last call: %+v; want a replay from its cache", name, e)
				}
			}
			key := lastEvent(t, a.Events).StoreKey
			if _, err := stB.Purge(t.Context(), key, store.PurgeOptions{}); err != nil {
				t.Fatal(err)
			}
			watchA.WaitHandled(t, key)
			watchB.WaitHandled(t, key)

			if _, err := a.Client(t).Do(ctx, req); err != nil {
				t.Fatal(err)
			}
			if e := lastEvent(t, a.Events); e.Decision != idempotency.DecisionExecuted || a.Service.Executions() != 2 {
				t.Fatalf("A after the purge: %+v, its handler ran %d times; want it run again", e, a.Service.Executions())
			}
			if _, err := b.Client(t).Do(ctx, req); err != nil {
				t.Fatal(err)
			}
			if e := lastEvent(t, b.Events); e.Decision != idempotency.DecisionReplayed || e.Cached {
				t.Fatalf("B after the purge: %+v; want a replay from the store", e)
			}
		})
	}
}

// TestReplayCacheRedisRestartClears: a Redis that restarts loses the
// purges published while the servers' subscriptions were down; once the
// subscription is back, the store says so (an invalidation of every key)
// and the server empties its cache, so a key purged meanwhile does not
// replay from it.
func TestReplayCacheRedisRestartClears(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	st := redisstore.New(srv.Client())
	watch := testkit.NewPurgeWatch(st, st)
	a := testkit.Serve(t, testkit.Config{Store: watch, Options: []idempotency.ServerOption{idempotency.WithReplayCache(100, 1<<20, time.Hour)}})
	watch.WaitSubscribed(t, 1)
	ctx := withKey(t.Context(), "k-restart")
	req := &testingv1.DoRequest{Payload: "charge"}
	for range 2 {
		if _, err := a.Client(t).Do(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if e := lastEvent(t, a.Events); !e.Cached {
		t.Fatalf("second call: %+v; want a replay from the cache", e)
	}
	srv.Restart() // empty: the key is gone, and no purge was published
	watch.WaitHandled(t, "")

	if _, err := a.Client(t).Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	if e := lastEvent(t, a.Events); e.Decision != idempotency.DecisionExecuted {
		t.Fatalf("after the restart: %+v; want the handler run again", e)
	}
}
