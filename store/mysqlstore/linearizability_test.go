package mysqlstore_test

import (
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestLinearizability checks a history of concurrent calls on two stores
// over one table, each with a pool of its own that reaches MySQL through
// a fault proxy, against the model of the store contract, while replies
// are dropped, connections cut, stalled and slowed, and both sweepers run.
func TestLinearizability(t *testing.T) {
	t.Parallel()
	direct, _ := newStore(t, 2)
	var stores []store.Store
	var proxies []*faultproxy.Proxy
	for range 2 {
		cfg := mysqltest.Config(t)
		p, err := faultproxy.New(cfg.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		cfg.Addr = p.Addr()
		s := mysqlstore.New(mysqltest.DBFrom(t, cfg, 8), mysqlstore.WithTable(tableOf(t, direct)), mysqlstore.WithSweepInterval(10*time.Millisecond))
		t.Cleanup(func() { _ = s.Close() })
		stores, proxies = append(stores, s), append(proxies, p)
	}
	faults, heal := faultproxy.Faults(proxies...)
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{Stores: stores, Faults: faults, Heal: heal})
}
