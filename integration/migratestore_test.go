package idempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// The migratestore adapter keeps the whole store contract on a move from
// the memory store to Redis (store/migratestore runs it between two
// memory stores).
func TestMigratestoreConformanceMemoryToRedis(t *testing.T) {
	t.Parallel()
	from := testkit.NewMemoryStore(t)
	to := redisstore.New(redistest.StartServer(t).Client())
	storetest.Run(t, func(*testing.T) store.Store { return migratestore.New(from, to) })
}

// The migratestore adapter keeps the whole store contract on a move off a
// SQLite file to Redis, the move TestDeployFromSQLiteToShared deploys
// (decision 312).
func TestMigratestoreConformanceSQLiteToRedis(t *testing.T) {
	t.Parallel()
	from, _, _ := newSQLiteStore(t)
	to := redisstore.New(redistest.StartServer(t).Client())
	storetest.Run(t, func(*testing.T) store.Store { return migratestore.New(from, to) })
}

// TestMigratestoreMoveRedisPrefix follows the move procedure of
// docs/operations.md over real gRPC servers, from one Redis key prefix to
// another on the same server.
func TestMigratestoreMoveRedisPrefix(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	testkit.MoveOverServers(t, redisstore.New(rdb, redisstore.WithPrefix("old:")), redisstore.New(rdb, redisstore.WithPrefix("new:")))
}
