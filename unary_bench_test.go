package idempotency_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/redistest"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

var benchCallers = []int{1, 64}

// BenchmarkUnary compares a bare bufconn unary call (no interceptor) with
// the same call through the idempotency interceptor, on the executed path
// (a new key every call) and the replay path (one stored key), at 1 and 64
// concurrent callers. Every row sends the same request and key metadata, so
// the interceptor is the only difference: compare each row with "bare" of
// the same run. Redis rows report round trips per call (connection
// handshakes excluded), and the redis-ceiling rows run the same store
// scripts with the same concurrency and no gRPC at all: what loopback Redis
// allows on this machine.
func BenchmarkUnary(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		client := testserver.New(b, &testserver.Service{}).Client(b)
		forCallers(b, func(b *testing.B, callers int) { benchCalls(b, client, callers, false) })
	})
	for _, path := range []string{"executed", "replay"} {
		replay := path == "replay"
		b.Run("memory-"+path, func(b *testing.B) {
			s := memorystore.New()
			b.Cleanup(func() { _ = s.Close() })
			client := serve(b, s)
			forCallers(b, func(b *testing.B, callers int) { benchCalls(b, client, callers, replay) })
		})
		b.Run("redis-"+path, func(b *testing.B) {
			rdb, trips := benchRedis(b)
			client := serve(b, redisstore.New(rdb))
			forCallers(b, func(b *testing.B, callers int) {
				trips.Reset()
				benchCalls(b, client, callers, replay)
				b.ReportMetric(float64(trips.Count())/float64(b.N), "roundtrips/op")
			})
		})
		b.Run("redis-ceiling-"+path, func(b *testing.B) {
			rdb, _ := benchRedis(b)
			s := redisstore.New(rdb)
			forCallers(b, func(b *testing.B, callers int) { benchStore(b, s, callers, replay) })
		})
	}
}

func forCallers(b *testing.B, f func(b *testing.B, callers int)) {
	for _, callers := range benchCallers {
		b.Run("callers="+strconv.Itoa(callers), func(b *testing.B) { f(b, callers) })
	}
}

func serve(b *testing.B, s store.Store) testingv1.TestServiceClient {
	return testserver.New(b, &testserver.Service{},
		grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(s))).Client(b)
}

// benchRedis starts a redis-server and returns a client with the scripts
// loaded and a round-trip counter attached.
func benchRedis(b *testing.B) (*redis.Client, *redistest.RoundTrips) {
	rdb := redistest.StartServer(b).Client()
	if err := redisstore.New(rdb).LoadScripts(b.Context()); err != nil {
		b.Fatal(err)
	}
	trips := &redistest.RoundTrips{}
	rdb.AddHook(trips)
	return rdb, trips
}

// parallel runs body b.N times from callers goroutines (one goroutine
// when callers is 1), handing each call a sequence number.
func parallel(b *testing.B, callers int, body func(i int64)) {
	b.ReportAllocs()
	var seq atomic.Int64
	if callers == 1 {
		for b.Loop() {
			body(seq.Add(1))
		}
		return
	}
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body(seq.Add(1))
		}
	})
}

// benchCalls makes b.N calls. With replay, every call sends one key,
// stored before the timer starts; otherwise every call has a new key.
func benchCalls(b *testing.B, client testingv1.TestServiceClient, callers int, replay bool) {
	req := &testingv1.DoRequest{Payload: "benchmark", Amount: 4200}
	prefix := b.Name() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	ctxFor := func(i int64) context.Context {
		if replay {
			i = 0
		}
		return metadata.AppendToOutgoingContext(context.Background(), idempotency.MetadataKey, prefix+strconv.FormatInt(i, 10))
	}
	if replay {
		if _, err := client.Do(ctxFor(0), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	parallel(b, callers, func(i int64) {
		if _, err := client.Do(ctxFor(i), req); err != nil {
			b.Error(err)
		}
	})
}

// benchStore runs the store steps a call needs, straight on the store:
// claim and complete for an executed call, one claim for a replay.
func benchStore(b *testing.B, s store.Store, callers int, replay bool) {
	ctx := context.Background()
	fp, data := make([]byte, 33), make([]byte, 120)
	prefix := b.Name() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	if replay {
		c, err := s.Claim(ctx, prefix+"0", fp, time.Minute)
		if err != nil || s.Complete(ctx, prefix+"0", c.Token, data, time.Hour) != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	parallel(b, callers, func(i int64) {
		key := prefix + "0"
		if !replay {
			key = prefix + strconv.FormatInt(i, 10)
		}
		c, err := s.Claim(ctx, key, fp, time.Minute)
		if err != nil {
			b.Error(err)
			return
		}
		if !replay {
			if err := s.Complete(ctx, key, c.Token, data, time.Hour); err != nil {
				b.Error(err)
			}
		}
	})
}
