package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// conformance runs the shared suite against stores on rdb, built with
// opts. Every case uses keys of its own, so they share the client.
func conformance(t *testing.T, rdb redis.UniversalClient, opts ...redisstore.Option) {
	t.Helper()
	storetest.Run(t, func(t *testing.T) store.Store {
		return redisstore.New(rdb, opts...)
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

func TestConformanceWithoutPipelining(t *testing.T) {
	t.Parallel()
	conformance(t, redistest.StartServer(t).Client(), redisstore.WithoutPipelining())
}

func TestConformanceClusterWithoutPipelining(t *testing.T) {
	t.Parallel()
	conformance(t, redistest.StartCluster(t).Client(), redisstore.WithoutPipelining())
}

// TestConformanceMinReplicas runs the suite with every claim and
// completion acknowledged by both replicas of a Sentinel-managed master.
func TestConformanceMinReplicas(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinelWith(t, redistest.SentinelConfig{Replicas: 2})
	conformance(t, s.Client(), redisstore.WithMinReplicas(2, time.Second))
}
