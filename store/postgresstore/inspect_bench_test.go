package postgresstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
)

// inspectFillSQL writes $1 rows in the interceptor's shapes (a SHA-256 key
// and fingerprint; 1% in flight, the rest completed with a 200-byte
// outcome; an hour's TTL), with tokens of store.NewToken's shape claimed
// ten minutes ago.
const inspectFillSQL = `
INSERT INTO %s (key, state, token, fingerprint, data, expires_at)
SELECT sha256(int8send(i)), CASE WHEN i %% 100 = 0 THEN 1 ELSE 2 END,
	convert_to('1', 'UTF8') || convert_to(translate(encode(
		substring(int8send((extract(epoch FROM clock_timestamp() - interval '10 minutes') * 1000)::bigint) FROM 3) || substring(uuid_send(gen_random_uuid()) FROM 1 FOR 12),
		'base64'), '+/=', '-_'), 'UTF8'),
	sha256(int8send(-i)),
	CASE WHEN i %% 100 = 0 THEN NULL ELSE convert_to(repeat('x', 200), 'UTF8') END,
	clock_timestamp() + interval '1 hour'
FROM generate_series(1, $1) AS i`

// BenchmarkInspectPostgres measures the store.Inspector on a table of
// 1,000,000 rows: a page of List (Limit 100, each page from the cursor of
// the one before, as a walk goes), a page of List of the entries in flight
// for five minutes or more (the same work, fewer entries kept), a Lookup,
// and Stats (a sequential scan of the table). Each reports its p50 and p99
// latency.
func BenchmarkInspectPostgres(b *testing.B) {
	n := benchtest.Size(1_000_000)
	s, pool := newStore(b, 4, postgresstore.WithSweepInterval(0))
	table := tableOf(b, s)
	ctx := b.Context()
	if _, err := pool.Exec(ctx, fmt.Sprintf(inspectFillSQL, table), n); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
		b.Fatal(err)
	}
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
				page, err := s.List(ctx, opts)
				lat = append(lat, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				entries += len(page.Entries)
				opts.Cursor = page.Next
			}
			benchtest.ReportLatency(b, lat)
			b.ReportMetric(float64(entries)/float64(len(lat)), "entries/page")
		})
	}
	b.Run("lookup", func(b *testing.B) {
		lat := make([]time.Duration, 0, 1024)
		i := 1
		for b.Loop() {
			key := int8Key(i%n + 1)
			i += 7919
			start := time.Now()
			_, err := s.Lookup(ctx, string(key))
			lat = append(lat, time.Since(start))
			if err != nil {
				b.Fatal(err)
			}
		}
		benchtest.ReportLatency(b, lat)
	})
	b.Run("stats", func(b *testing.B) {
		lat := make([]time.Duration, 0, 16)
		for b.Loop() {
			start := time.Now()
			st, err := s.Stats(ctx)
			lat = append(lat, time.Since(start))
			if err != nil || st.InFlight.Entries+st.Completed.Entries != int64(n) {
				b.Fatalf("Stats = %+v, %v", st, err)
			}
		}
		benchtest.ReportLatency(b, lat)
	})
}
