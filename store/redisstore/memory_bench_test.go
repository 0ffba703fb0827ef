package redisstore_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// BenchmarkMemoryPerRecord writes b.N completed entries into a fresh
// redis-server, in the shapes the interceptor uses (a 43-character key, a
// 33-byte fingerprint, 200 bytes of data, an hour's retention), and
// reports what Redis holds per entry: the growth of used_memory divided
// by b.N (B/record: the key, its value, its expiry and their share of the
// hash tables) and MEMORY USAGE of one entry (usage-B/record). Give it a
// fixed count, for example -benchtime=100000x.
func BenchmarkMemoryPerRecord(b *testing.B) {
	rdb := redistest.StartServer(b).Client()
	st := redisstore.New(rdb)
	ctx := b.Context()
	data := bytes.Repeat([]byte{0xab}, 200)
	keyOf := func(i int64) (key string, fingerprint []byte) {
		sum := sha256.Sum256(strconv.AppendInt([]byte(b.Name()), i, 10))
		return base64.RawURLEncoding.EncodeToString(sum[:]), append([]byte{1}, sum[:]...)
	}
	before := usedMemory(b, rdb)
	var seq atomic.Int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key, fingerprint := keyOf(seq.Add(1))
			c, err := st.Claim(ctx, key, fingerprint, longTTL, store.ClaimOptions{})
			if err == nil && !c.Won() {
				b.Errorf("Claim of a new key = %+v", c)
			}
			if err == nil {
				err = st.Complete(ctx, key, c.Token, data, longTTL)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if n := rdb.DBSize(ctx).Val(); n != int64(b.N) {
		b.Fatalf("DBSIZE = %d after %d completed entries", n, b.N)
	}
	key, _ := keyOf(1)
	usage, err := rdb.MemoryUsage(ctx, redisstore.DefaultPrefix+key, 0).Result()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(usedMemory(b, rdb)-before)/float64(b.N), "B/record")
	b.ReportMetric(float64(usage), "usage-B/record")
}

// usedMemory returns used_memory of INFO memory.
func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	info, err := rdb.InfoMap(b.Context(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(info["Memory"]["used_memory"], 10, 64)
	if err != nil {
		b.Fatalf("INFO memory used_memory: %v", err)
	}
	return n
}
