package redisstore_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// BenchmarkClaimRedisDown measures what a failed Claim costs when Redis is
// down (its port refuses connections): Bare sends the claim's SET alone,
// Claim is the store's Claim, which releases after the failure. With
// FreshClient every call has a client of its own that has never failed,
// the slow case; with SameClient one client makes every call, and after
// PoolSize failed dials go-redis's pool stops dialing and fails at once.
// GoRedisDefaults keeps go-redis's retries (MaxRetries 3, DialerRetries
// 5); FailFast turns them off (MaxRetries -1, DialerRetries 1).
func BenchmarkClaimRedisDown(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now: dials are refused
	ctx := context.Background()
	for _, cfg := range []struct {
		name                      string
		maxRetries, dialerRetries int
	}{
		{"GoRedisDefaults", 0, 0},
		{"FailFast", -1, 1},
	} {
		newClient := func() *redis.Client {
			return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: cfg.maxRetries, DialerRetries: cfg.dialerRetries})
		}
		claims := map[string]func(rdb *redis.Client) error{
			"Bare": func(rdb *redis.Client) error {
				return rdb.Do(ctx, "set", "k", redisstore.EncodeInFlight("token", []byte("fp")), "nx", "get", "px", 60000).Err()
			},
			"Claim": func(rdb *redis.Client) error {
				_, err := redisstore.New(rdb).Claim(ctx, "k", []byte("fp"), time.Minute, store.ClaimOptions{})
				return err
			},
		}
		for _, name := range []string{"Bare", "Claim"} {
			claim := claims[name]
			b.Run(cfg.name+"/FreshClient/"+name, func(b *testing.B) {
				for b.Loop() {
					rdb := newClient()
					if claim(rdb) == nil {
						b.Fatal("a claim against a closed port succeeded")
					}
					_ = rdb.Close()
				}
			})
			b.Run(cfg.name+"/SameClient/"+name, func(b *testing.B) {
				rdb := newClient()
				defer rdb.Close()
				for b.Loop() {
					if claim(rdb) == nil {
						b.Fatal("a claim against a closed port succeeded")
					}
				}
			})
		}
	}
}
