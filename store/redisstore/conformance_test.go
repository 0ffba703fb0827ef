package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/redistest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// conformance runs the shared suite against stores on rdb. Every case uses
// keys of its own, so they share the client.
func conformance(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	storetest.Run(t, func(t *testing.T) store.Store {
		return redisstore.New(rdb)
	}, storetest.WithLease(250*time.Millisecond), storetest.WithRetention(250*time.Millisecond))
}

func TestConformanceStandalone(t *testing.T) {
	t.Parallel()
	conformance(t, redistest.StartServer(t).Client())
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	conformance(t, redistest.StartCluster(t).Client())
}

func TestConformanceSentinel(t *testing.T) {
	t.Parallel()
	conformance(t, redistest.StartSentinel(t).Client())
}
