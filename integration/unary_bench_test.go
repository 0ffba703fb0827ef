package idempotency_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// BenchmarkUnary compares a bare bufconn unary call (no interceptor) with
// the same call through the idempotency interceptor, on the executed path
// (a new key every call) and the replay path (one stored key), at 1 and 64
// concurrent callers. Every row sends the same request and key metadata, so
// the interceptor is the only difference: compare each row with "bare" of
// the same run. The memory-block and redis-block rows set a policy for
// abandoned claims (WithAbandonedClaims(AbandonBlock)), so every claim
// keeps its entry past its lease: compare them with the memory and redis
// rows (the same round trips). The memory-sealed rows are the memory rows with sealed
// records (WithSealing, one key): compare them with the memory rows of the
// same run, or read the memory-sealed-paired rows, which run both in turn
// (benchSealedPaired). Redis rows report the round trips on the wire per call
// (roundtrips/op, connection handshakes excluded: under 2 and 1 when
// concurrent calls share round trips, while each call still waits for one
// round trip per step) and the commands Redis executed per call, those the
// scripts call included (rediscmds/op, from INFO commandstats). The
// redis-nopipe rows turn pipelining off (redisstore.WithoutPipelining), the
// redis-wait rows make every claim and completion wait for one replica
// (redisstore.WithMinReplicas), and the redis-ceiling rows run the same
// store steps with the same concurrency and no gRPC at all: what loopback
// Redis allows on this machine. The redis-floor rows are the store floor
// (floor_store_bench_test.go): a bare handler that makes Redis's least
// for the path, GET for a replay, SET NX and SET for an executed call;
// divide the redis rows by them.
func BenchmarkUnary(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		client := testserver.New(b, &testserver.Service{}).Client(b)
		benchtest.ForCallers(b, func(b *testing.B, callers int) { benchCalls(b, client, callers, false, nil) })
	})
	for _, path := range []string{"executed", "replay"} {
		replay := path == "replay"
		b.Run("floor-"+path, func(b *testing.B) {
			client := testserver.New(b, &testserver.Service{}, grpc.ChainUnaryInterceptor(floorInterceptor())).Client(b)
			benchtest.ForCallers(b, func(b *testing.B, callers int) { benchCalls(b, client, callers, replay, nil) })
		})
		b.Run("memory-"+path, func(b *testing.B) {
			s := testkit.NewMemoryStore(b)
			client := serve(b, s)
			benchtest.ForCallers(b, func(b *testing.B, callers int) { benchCalls(b, client, callers, replay, nil) })
		})
		b.Run("memory-block-"+path, func(b *testing.B) {
			client := serve(b, testkit.NewMemoryStore(b), idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
			benchtest.ForCallers(b, func(b *testing.B, callers int) { benchCalls(b, client, callers, replay, nil) })
		})
		b.Run("memory-sealed-"+path, func(b *testing.B) {
			client := serve(b, testkit.NewMemoryStore(b), idempotency.WithSealing(benchSealing()))
			benchtest.ForCallers(b, func(b *testing.B, callers int) { benchCalls(b, client, callers, replay, nil) })
		})
		b.Run("memory-sealed-paired-"+path, func(b *testing.B) { benchSealedPaired(b, replay) })
		if replay {
			benchCachedReplays(b)
		}
		for _, variant := range []struct {
			name     string
			replicas int
			opts     []redisstore.Option
			server   []idempotency.ServerOption
		}{
			{"redis-", 0, nil, nil},
			{"redis-block-", 0, nil, []idempotency.ServerOption{idempotency.WithAbandonedClaims(idempotency.AbandonBlock)}},
			{"redis-nopipe-", 0, []redisstore.Option{redisstore.WithoutPipelining()}, nil},
			{"redis-wait-", 1, []redisstore.Option{redisstore.WithMinReplicas(1, time.Second)}, nil},
		} {
			b.Run(variant.name+path, func(b *testing.B) {
				rdb, trips := benchRedis(b, variant.replicas)
				client := serve(b, redisstore.New(rdb, variant.opts...), variant.server...)
				benchtest.ForCallers(b, func(b *testing.B, callers int) {
					var cpu time.Duration
					benchCalls(b, client, callers, replay, func() {
						resetCommandStats(b, rdb)
						cpu = redisCPU(b, rdb)
						trips.Reset()
					})
					b.ReportMetric(float64(trips.Count())/float64(b.N), "roundtrips/op")
					b.ReportMetric(float64(commandsExecuted(b, rdb))/float64(b.N), "rediscmds/op")
					b.ReportMetric(float64(redisCPU(b, rdb)-cpu)/float64(b.N), "redis-cpu-ns/op")
				})
			})
		}
		b.Run("redis-ceiling-"+path, func(b *testing.B) {
			rdb, trips := benchRedis(b, 0)
			s := redisstore.New(rdb)
			benchtest.ForCallers(b, func(b *testing.B, callers int) {
				var cpu time.Duration
				benchStore(b, s, callers, replay, func() {
					cpu = redisCPU(b, rdb)
					trips.Reset()
				})
				b.ReportMetric(float64(trips.Count())/float64(b.N), "roundtrips/op")
				b.ReportMetric(float64(redisCPU(b, rdb)-cpu)/float64(b.N), "redis-cpu-ns/op")
			})
		})
		b.Run("redis-floor-"+path, func(b *testing.B) {
			rdb, trips := benchRedis(b, 0)
			var cpu time.Duration
			benchFloor(b, redisFloor{rdb}, replay, floorCounter{
				reset: func(b *testing.B) {
					cpu = redisCPU(b, rdb)
					trips.Reset()
				},
				report: func(b *testing.B) {
					b.ReportMetric(float64(trips.Count())/float64(b.N), "roundtrips/op")
					b.ReportMetric(float64(redisCPU(b, rdb)-cpu)/float64(b.N), "redis-cpu-ns/op")
				},
			})
		})
	}
}

// serve starts the test service behind the interceptor of a Server over
// s, closed when the benchmark ends (a replay cache's subscription to the
// store's purges ends with it).
func serve(b *testing.B, s store.Store, opts ...idempotency.ServerOption) testingv1.TestServiceClient {
	b.Helper()
	srv := idempotency.NewServer(s, opts...)
	b.Cleanup(func() { _ = srv.Close() })
	return testserver.New(b, &testserver.Service{}, grpc.ChainUnaryInterceptor(srv.UnaryServerInterceptor())).Client(b)
}

// benchSealing returns the sealing of the memory-sealed rows: one key,
// fixed, so that every run seals alike.
func benchSealing() idempotency.Sealing {
	secret := make([]byte, idempotency.SealingKeySize)
	for i := range secret {
		secret[i] = byte(i)
	}
	return idempotency.Sealing{Keys: idempotency.NewKeyring(idempotency.SealingKey{ID: "k1", Secret: secret})}
}

// benchCachedReplays runs the replay rows of BenchmarkUnary with the
// replay cache in front of Redis, PostgreSQL and MySQL, counting the
// store's round trips per call.
func benchCachedReplays(b *testing.B) {
	for _, backend := range []struct {
		name string
		open func(b *testing.B) (store.Store, func() int64, func())
	}{
		{"redis", func(b *testing.B) (store.Store, func() int64, func()) {
			rdb, trips := benchRedis(b, 0)
			return redisstore.New(rdb), func() int64 { return int64(trips.Count()) }, trips.Reset
		}},
		{"postgres", func(b *testing.B) (store.Store, func() int64, func()) {
			s, trips, _ := benchPostgres(b)
			return s, func() int64 { return trips.Queries() + trips.Prepares() }, trips.Reset
		}},
		{"mysql", func(b *testing.B) (store.Store, func() int64, func()) {
			s, trips, _ := benchMySQL(b)
			return s, trips.Statements, trips.Reset
		}},
	} {
		b.Run(backend.name+"-replay-cached", func(b *testing.B) {
			s, count, reset := backend.open(b)
			client := serve(b, s, idempotency.WithReplayCache(1024, 1<<20, time.Hour))
			benchtest.ForCallers(b, func(b *testing.B, callers int) {
				benchCalls(b, client, callers, true, reset)
				b.ReportMetric(float64(count())/float64(b.N), "roundtrips/op")
			})
		})
	}
}

// benchRedis starts a redis-server, with replicas when asked, and returns
// a client of the master with the scripts loaded and a round-trip counter
// attached.
func benchRedis(b *testing.B, replicas int) (*redis.Client, *redistest.RoundTrips) {
	b.Helper()
	var rdb *redis.Client
	if replicas > 0 {
		rdb = redistest.StartSentinelWith(b, redistest.SentinelConfig{Replicas: replicas}).Master.Client()
	} else {
		rdb = redistest.StartServer(b).Client()
	}
	if err := redisstore.New(rdb).LoadScripts(b.Context()); err != nil {
		b.Fatal(err)
	}
	trips := &redistest.RoundTrips{}
	rdb.AddHook(trips)
	return rdb, trips
}

// resetCommandStats zeroes the command counters of INFO commandstats.
func resetCommandStats(b *testing.B, rdb *redis.Client) {
	b.Helper()
	if err := rdb.ConfigResetStat(b.Context()).Err(); err != nil {
		b.Fatal(err)
	}
}

// redisCPU returns the CPU time redis-server has used (INFO cpu, user and
// system, its main thread and the others).
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	b.Helper()
	info, err := rdb.InfoMap(b.Context(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(info["CPU"][k], 64)
		if err != nil {
			b.Fatalf("INFO cpu %s: %v", k, err)
		}
		total += v
	}
	return time.Duration(total * float64(time.Second))
}

// commandsExecuted returns how many commands Redis executed since the
// last resetCommandStats, those scripts call included, leaving out the
// benchmark's own (INFO, CONFIG) and connection handshakes (HELLO, CLIENT).
func commandsExecuted(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	info, err := rdb.Info(b.Context(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for line := range strings.SplitSeq(info, "\r\n") {
		name, stats, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		switch base, _, _ := strings.Cut(name, "|"); base {
		case "info", "config", "hello", "client", "ping", "replconf", "psync":
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(stats, "calls="), ",")
		c, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			b.Fatalf("INFO commandstats line %q: %v", line, err)
		}
		n += c
	}
	return n
}

// benchCalls makes b.N calls. With replay, every call sends one key,
// stored before the timer starts; otherwise every call has a new key.
// start, when not nil, runs just before the timer starts.
func benchCalls(b *testing.B, client testingv1.TestServiceClient, callers int, replay bool, start func()) {
	req := &testingv1.DoRequest{Payload: "benchmark", Amount: 4200}
	// Keys of one length on every row, so that no row sends more bytes
	// of key than another.
	key := benchtest.Keys(replay)
	ctxFor := func(i int64) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), idempotency.MetadataKey, key(i))
	}
	if replay {
		if _, err := client.Do(ctxFor(0), req); err != nil {
			b.Fatal(err)
		}
	}
	if start != nil {
		start()
	}
	runtime.GC() // no garbage of the rows before this one
	b.ResetTimer()
	benchtest.Parallel(b, callers, func(i int64) {
		if _, err := client.Do(ctxFor(i), req); err != nil {
			b.Error(err)
		}
	})
}

// benchStore runs the store steps a call needs, straight on the store:
// claim and complete for an executed call, one claim for a replay. start,
// when not nil, runs just before the timer starts.
func benchStore(b *testing.B, s store.Store, callers int, replay bool, start func()) {
	ctx := context.Background()
	fp, data := make([]byte, 33), make([]byte, 120)
	keyOf := benchtest.Keys(replay)
	if replay {
		c, err := s.Claim(ctx, keyOf(0), fp, time.Minute, store.ClaimOptions{})
		if err != nil || s.Complete(ctx, keyOf(0), c.Token, data, time.Hour) != nil {
			b.Fatal(err)
		}
	}
	if start != nil {
		start()
	}
	runtime.GC()
	b.ResetTimer()
	benchtest.Parallel(b, callers, func(i int64) {
		key := keyOf(i)
		c, err := s.Claim(ctx, key, fp, time.Minute, store.ClaimOptions{})
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
