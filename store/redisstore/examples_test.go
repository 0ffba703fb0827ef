package redisstore_test

import (
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// A store on a single Redis server, given to the server interceptor. The
// caller owns the client and closes it after the server stops.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		idempotency.UnaryServerInterceptor(redisstore.New(rdb)),
	))
	defer srv.Stop()
	// Register services and serve.
}

// A store on a Redis Cluster: each step runs on the one node that owns
// its key.
func Example_cluster() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{"redis-0:6379", "redis-1:6379", "redis-2:6379"},
	})
	defer rdb.Close()
	_ = redisstore.New(rdb)
}

// A store on a master found through Redis Sentinel.
func Example_sentinel() {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "mymaster",
		SentinelAddrs: []string{"sentinel-0:26379", "sentinel-1:26379", "sentinel-2:26379"},
	})
	defer rdb.Close()
	_ = redisstore.New(rdb)
}

// Two services sharing one Redis keep their entries apart with prefixes.
func ExampleWithPrefix() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	_ = redisstore.New(rdb, redisstore.WithPrefix("payments:idempotency:"))
}

// A store whose claims and completions wait until one replica of the
// master holds them, for up to 500 ms each: a Sentinel failover then keeps
// every claim and completion a call was told of.
func ExampleWithMinReplicas() {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "mymaster",
		SentinelAddrs: []string{"sentinel-0:26379", "sentinel-1:26379", "sentinel-2:26379"},
	})
	defer rdb.Close()
	_ = redisstore.New(rdb, redisstore.WithMinReplicas(1, 500*time.Millisecond))
}
