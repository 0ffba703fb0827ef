package redisstore_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// BenchmarkInspectRedis measures the store.Inspector on a redis-server
// holding 1,000,000 entries in the interceptor's shapes (a 43-character
// key, a 33-byte fingerprint; 1% in flight, the rest completed with 200
// bytes of data, an hour's TTL; claimed ten minutes ago): a page of List
// (Limit 100, each page
// from the cursor of the one before, as a walk goes), a page of List of
// the entries in flight for five minutes or more (the same work, fewer
// entries kept), a Lookup, and Stats (a sample of 1,000 keys). Each
// reports its p50 and p99 latency.
func BenchmarkInspectRedis(b *testing.B) {
	n := benchtest.Size(1_000_000)
	rdb := redistest.StartServer(b).Client()
	fillRedis(b, rdb, n)
	st := redisstore.New(rdb)
	if err := st.LoadScripts(b.Context()); err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	for _, tc := range []struct {
		name string
		opts store.ListOptions
	}{
		{"list", store.ListOptions{Limit: 100}},
		{"list-inflight-5m", store.ListOptions{Limit: 100, State: store.StateInFlight, MinAge: 5 * time.Minute}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			opts := tc.opts
			lat := make([]time.Duration, 0, 1024)
			entries := 0
			for b.Loop() {
				start := time.Now()
				page, err := st.List(ctx, opts)
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				entries += len(page.Entries)
				opts.Cursor = page.Next
			}
			reportLatency(b, lat)
			b.ReportMetric(float64(entries)/float64(len(lat)), "entries/page")
		})
	}
	b.Run("lookup", func(b *testing.B) {
		lat := make([]time.Duration, 0, 1024)
		i := 0
		for b.Loop() {
			key := benchKey(i % n)
			i += 7919
			start := time.Now()
			_, err := st.Lookup(ctx, key)
			lat = append(lat, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
		}
		reportLatency(b, lat)
	})
	b.Run("stats", func(b *testing.B) {
		// Stats counts a store of up to 1,000 keys exactly (the size under
		// -short), and estimates a larger one from a sample.
		exact := n <= 1000
		lat := make([]time.Duration, 0, 1024)
		for b.Loop() {
			start := time.Now()
			s, err := st.Stats(ctx)
			lat = append(lat, time.Since(start))
			if err != nil || s.Estimated == exact || exact && s.InFlight.Entries+s.Completed.Entries != int64(n) {
				b.Fatalf("Stats = %+v, %v", s, err)
			}
		}
		reportLatency(b, lat)
	})
}

// benchKey returns the i-th key of fillRedis: a base64url SHA-256, as the
// interceptor makes them.
func benchKey(i int) string {
	sum := sha256.Sum256(strconv.AppendInt(nil, int64(i), 10))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// fillRedis writes n entries, 1% of them in flight, in pipelines.
func fillRedis(b *testing.B, rdb *redis.Client, n int) {
	b.Helper()
	ctx := b.Context()
	data := bytes.Repeat([]byte{0xab}, 200)
	const batch = 10_000
	for lo := 0; lo < n; lo += batch {
		p := rdb.Pipeline()
		for i := lo; i < min(lo+batch, n); i++ {
			sum := sha256.Sum256([]byte(benchKey(i)))
			v := redisstore.EncodeInFlight(tokenAt(time.Now().Add(-10*time.Minute)), append([]byte{1}, sum[:]...))
			if i%100 != 0 {
				v[1] = 'c'
				v = append(v, data...)
			}
			p.Set(ctx, redisstore.DefaultPrefix+benchKey(i), v, time.Hour)
		}
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// tokenAt returns a token of store.NewToken's shape claimed at t.
func tokenAt(t time.Time) string {
	b := make([]byte, 18)
	_, _ = rand.Read(b[6:])
	ms := t.UnixMilli()
	for i := 5; i >= 0; i-- {
		b[i], ms = byte(ms), ms>>8
	}
	return "1" + base64.RawURLEncoding.EncodeToString(b)
}

// reportLatency reports the p50 and p99 of lat.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
