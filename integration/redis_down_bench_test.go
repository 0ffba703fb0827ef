package idempotency_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// BenchmarkFirstCallRedisDown measures how long a caller waits for its
// answer, UNAVAILABLE with IDEMPOTENCY_STORE_UNAVAILABLE, when the
// server's Redis is down: ns/op is one call, made by a fresh client
// through a fresh server whose go-redis client has never reached Redis
// (the slow case: go-redis's pool has not yet given up dialing). The
// figures are in docs/operations.md ("Failing fast").
//
//   - Refused: nothing listens on Redis's port (a stopped Redis).
//   - Stalled: a proxy in front of a real Redis accepts connections and
//     never answers (a hung Redis, a partition that drops packets).
//
// go-redis options: GoRedisDefaults; NoDialRetries sets DialerRetries 1;
// Recommended adds ContextTimeoutEnabled and 1s dial, read and write
// timeouts (docs/operations.md). Client: OneAttempt is the server side
// alone (WithMaxAttempts(1)); DefaultClient is UnaryClientInterceptor
// with its defaults (5 attempts, backoff raised to the server's 1s
// pushback). attempts/op counts the attempts the client made.
//
//	go test -run '^$' -bench BenchmarkFirstCallRedisDown -benchtime=1x .
func BenchmarkFirstCallRedisDown(b *testing.B) {
	// A go-redis client that counted PoolSize failed dials probes Redis in
	// a goroutine that sleeps 1s between probes and ends once its client
	// is closed: let the last one end before goleak looks.
	b.Cleanup(func() { time.Sleep(1100 * time.Millisecond) })
	refused := closedRedisAddr(b)
	rs := redistest.StartServer(b)
	proxy, err := faultproxy.New(rs.Addr())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = proxy.Close() })
	proxy.Stall()
	scenarios := []struct{ name, addr string }{{"Refused", refused}, {"Stalled", proxy.Addr()}}
	configs := []struct {
		name string
		opts func(addr string) *redis.Options
	}{
		{"GoRedisDefaults", func(addr string) *redis.Options { return &redis.Options{Addr: addr} }},
		{"NoDialRetries", func(addr string) *redis.Options { return &redis.Options{Addr: addr, DialerRetries: 1} }},
		{"Recommended", recommendedRedisOptions},
	}
	clients := []struct {
		name string
		opts []idempotency.ClientOption
	}{
		{"OneAttempt", []idempotency.ClientOption{idempotency.WithMaxAttempts(1)}},
		{"DefaultClient", nil},
	}
	for _, sc := range scenarios {
		for _, cfg := range configs {
			for _, cl := range clients {
				b.Run(sc.name+"/"+cfg.name+"/"+cl.name, func(b *testing.B) {
					if testing.Short() && (cfg.name != "Recommended" || cl.name != "OneAttempt") {
						// Under -short (CI's smoke), the quickest row of each
						// scenario only: the others wait up to a minute each.
						b.Skip("waits seconds to minutes on a down Redis; run without -short")
					}
					var attempts int
					for range b.N {
						b.StopTimer()
						call, n := firstCallThroughDownRedis(b, cfg.opts(sc.addr), cl.opts)
						b.StartTimer()
						err := call()
						b.StopTimer()
						if idempotency.Reason(err) != idempotency.ErrStoreUnavailable.Reason || status.Code(err) != codes.Unavailable {
							b.Fatalf("err = %v, want UNAVAILABLE %s", err, idempotency.ErrStoreUnavailable.Reason)
						}
						attempts += *n
						b.StartTimer()
					}
					b.ReportMetric(float64(attempts)/float64(b.N), "attempts/op")
				})
			}
		}
	}
}

// recommendedRedisOptions are the go-redis options docs/operations.md
// recommends for an idempotency store that must fail fast.
func recommendedRedisOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		DialerRetries:         1, // the client interceptor retries, with backoff and the same key
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		ContextTimeoutEnabled: true, // the caller's deadline and WithStoreTimeout bound the network I/O
	}
}

// firstCallThroughDownRedis builds a server on a new go-redis client and a
// client with the given options, and returns the call to measure and the
// number of attempts it made, once it has run.
func firstCallThroughDownRedis(b *testing.B, opts *redis.Options, clientOpts []idempotency.ClientOption) (func() error, *int) {
	b.Helper()
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { _ = rdb.Close() })
	srv := testserver.New(b, &testserver.Service{},
		grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(redisstore.New(rdb))))
	attempts := new(int)
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		*attempts++
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	client := srv.Client(b, grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor(clientOpts...), count))
	return func() error {
		_, err := client.Do(context.Background(), &testingv1.DoRequest{Payload: "p"})
		return err
	}, attempts
}

// closedRedisAddr returns a loopback address where nothing listens.
func closedRedisAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
