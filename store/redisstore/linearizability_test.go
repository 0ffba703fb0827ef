package redisstore_test

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestLinearizability checks a history of concurrent calls on two stores,
// each with a client of its own that reaches one redis-server through a
// fault proxy, against the model of the store contract, while replies
// are dropped, connections cut, stalled and slowed. go-redis resends a
// command whose connection broke (MaxRetries), and a resend is a second
// call the history does not show: a resent claim finds its own first try
// and reports it in flight (the package documentation's "Failed claims").
// So the clients here do not resend (MaxRetries -1): a broken call is
// indeterminate, as the check expects. (A resent Purge deletes nothing
// claimed since its first send: TestPurgeResentAfterReplyLost.)
func TestLinearizability(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	var stores []store.Store
	var proxies []*faultproxy.Proxy
	for range 2 {
		p, err := faultproxy.New(rs.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		s := redisstore.New(rdb)
		if err := s.LoadScripts(t.Context()); err != nil {
			t.Fatal(err)
		}
		stores, proxies = append(stores, s), append(proxies, p)
	}
	faults, heal := faultproxy.Faults(proxies...)
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{Stores: stores, Faults: faults, Heal: heal})
}

// TestLinearizabilityReshard checks a history of concurrent calls on two
// stores over a Redis Cluster while the slots of the keys called move
// between masters, one after another, back and forth: the calls meet ASK
// and MOVED mid-migration.
func TestLinearizabilityReshard(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t)
	var stores []store.Store
	for range 2 {
		s := redisstore.New(cluster.Client())
		if err := s.LoadScripts(t.Context()); err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	var slots []int
	var moves atomic.Int64
	reshard := func() {
		if len(slots) == 0 {
			return
		}
		slot := slots[rand.IntN(len(slots))]
		to := rand.IntN(len(cluster.Addrs()))
		from, err := cluster.MigrateSlot(t.Context(), slot, to, redistest.MigrateOptions{Pause: 5 * time.Millisecond})
		if err != nil {
			t.Errorf("migrate slot %d: %v", slot, err)
			return
		}
		if from != to {
			moves.Add(1)
		}
	}
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{
		Stores: stores,
		OnKeys: func(keys []string) {
			rdb := cluster.Client()
			defer rdb.Close()
			for _, k := range keys {
				slot, err := rdb.ClusterKeySlot(t.Context(), redisstore.DefaultPrefix+k).Result()
				if err != nil {
					t.Fatal(err)
				}
				slots = append(slots, int(slot))
			}
		},
		Faults: []func(){reshard}, FaultEvery: time.Millisecond,
	})
	t.Logf("%d slot migrations while the calls ran", moves.Load())
	if moves.Load() == 0 {
		t.Error("no slot moved while the calls ran")
	}
}
