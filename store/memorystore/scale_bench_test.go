package memorystore_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"runtime"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	recordv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/record/v1"
	"github.com/grpc-idempotency/idempotency/internal/record"
	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// storeKey returns a key shaped like the interceptor's: base64url SHA-256.
func storeKey(i int) string {
	sum := sha256.Sum256(binary.AppendUvarint(nil, uint64(i)))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// record200 is an encoded outcome record holding a 200-byte response, the
// way the interceptor stores one.
func record200(fp []byte) []byte {
	now := timestamppb.Now()
	data, err := record.Encode(&recordv1.Record{
		Version: record.Version, State: recordv1.State_STATE_COMPLETED, Fingerprint: fp,
		Outcome: recordv1.Outcome_OUTCOME_RESPONSE, ResponseType: "shop.v1.PlaceOrderResponse",
		Response: make([]byte, 200), CreatedAt: now, CompletedAt: now,
	})
	if err != nil {
		panic(err)
	}
	return data
}

// fillRecords completes n keys with a 200-byte-response record.
func fillRecords(tb testing.TB, s *memorystore.Store, n int, fp, data []byte) {
	tb.Helper()
	ctx := context.Background()
	for i := range n {
		k := storeKey(i)
		c, err := s.Claim(ctx, k, fp, time.Minute, store.ClaimOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		if err := s.Complete(ctx, k, c.Token, data, time.Hour); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkScale measures claim latency (a new key, released afterwards so
// the number of live records stays put) and replay latency (a claim that
// finds a completed key) with 1,000 and with 1,000,000 live records, and
// reports p50 and p99 per operation: the cost must stay flat. The
// replay-while-sweeping rows run the sweeper back to back (every
// millisecond) and report the worst latency too: a stop-the-world scan
// would show there. It also reports heap bytes per stored record for a
// 200-byte response.
func BenchmarkScale(b *testing.B) {
	fp := make([]byte, 33)
	data := record200(fp)
	for _, n := range benchtest.Sizes(1_000, 1_000_000) {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			s := memorystore.New()
			b.Cleanup(func() { _ = s.Close() })
			fillRecords(b, s, n, fp, data)
			runtime.GC()
			runtime.ReadMemStats(&after)
			perRecord := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)

			b.Run("claim", func(b *testing.B) {
				benchtest.ClaimNew(b, s, fp, n, storeKey)
				b.ReportMetric(perRecord, "B/record")
			})
			b.Run("replay", func(b *testing.B) { benchReplay(b, s, n, fp) })
			b.Run("replay-while-sweeping", func(b *testing.B) {
				sweeping := memorystore.New(memorystore.WithSweepInterval(time.Millisecond))
				b.Cleanup(func() { _ = sweeping.Close() })
				b.StopTimer()
				fillRecords(b, sweeping, n, fp, data)
				b.StartTimer()
				benchReplay(b, sweeping, n, fp)
			})
		})
	}
}

// benchReplay claims 512 completed keys spread over the n stored ones: the
// same working set at every size, so only the size of the store differs.
func benchReplay(b *testing.B, s *memorystore.Store, n int, fp []byte) {
	keys := make([]string, 512)
	for j := range keys {
		keys[j] = storeKey(j * n / len(keys))
	}
	benchtest.ClaimCompleted(b, s, fp, keys)
}

// reportLatency reports the full-store rows' latencies as the scale rows'.
var reportLatency = benchtest.ReportLatency
