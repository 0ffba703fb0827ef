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
// are dropped, connections cut, stalled and slowed. go-redis resends a
// command whose connection broke (MaxRetries), and a resend is a second
// call the history does not show: a resent claim finds its own first try
// and reports it in flight (the package documentation's "Failed claims"),
// and a resent Purge without a fence can purge the entry claimed after
// the one it purged. So the clients here do not resend (MaxRetries -1):
// a broken call is indeterminate, as the check expects.
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
