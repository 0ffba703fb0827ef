package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/internal/test/redistest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestLinearizability checks a history of concurrent calls on two stores,
// each with a client of its own that reaches one redis-server through a
// fault proxy, against the model of the store contract, while replies
// are dropped, connections cut, stalled and slowed.
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
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
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
