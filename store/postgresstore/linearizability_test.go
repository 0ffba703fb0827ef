package postgresstore_test

import (
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestLinearizability checks a history of concurrent calls on two stores
// over one table, each with a pool of its own that reaches PostgreSQL
// through a fault proxy, against the model of the store contract, while
// replies are dropped, connections cut, stalled and slowed, and both
// sweepers run.
func TestLinearizability(t *testing.T) {
	t.Parallel()
	direct, _ := newStore(t, 2)
	var stores []store.Store
	var proxies []*faultproxy.Proxy
	for range 2 {
		cfg, p := proxiedConfig(t, 8)
		s := postgresstore.New(pgtest.PoolFrom(t, cfg), postgresstore.WithTable(tableOf(t, direct)), postgresstore.WithSweepInterval(10*time.Millisecond))
		t.Cleanup(func() { _ = s.Close() })
		stores, proxies = append(stores, s), append(proxies, p)
	}
	faults, heal := faultproxy.Faults(proxies...)
	// pgx finds a connection cut only when it next uses it, so each cut
	// fails a call per pooled connection: fewer faults than the default
	// keep most calls determinate.
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{Stores: stores, Faults: faults, Heal: heal, FaultEvery: 100 * time.Millisecond})
}
