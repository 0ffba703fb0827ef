package postgresstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
)

// oldClaimSQL is the claim statement of earlier releases, which rewrote a live
// completed row unchanged in order to return it: kept here only to compare
// with in the same run.
const oldClaimSQL = `
INSERT INTO {t} AS r (key, state, token, fingerprint, expires_at)
VALUES ($1, 1, $2, $3, clock_timestamp() + $4::bigint * interval '1 microsecond')
ON CONFLICT (key) DO UPDATE SET
	state       = CASE WHEN r.expires_at <= excluded.expires_at - $4::bigint * interval '1 microsecond' THEN excluded.state ELSE r.state END,
	token       = CASE WHEN r.expires_at <= excluded.expires_at - $4::bigint * interval '1 microsecond' THEN excluded.token ELSE r.token END,
	fingerprint = CASE WHEN r.expires_at <= excluded.expires_at - $4::bigint * interval '1 microsecond' THEN excluded.fingerprint ELSE r.fingerprint END,
	data        = CASE WHEN r.expires_at <= excluded.expires_at - $4::bigint * interval '1 microsecond' THEN NULL ELSE r.data END,
	expires_at  = CASE WHEN r.expires_at <= excluded.expires_at - $4::bigint * interval '1 microsecond' THEN excluded.expires_at ELSE r.expires_at END
RETURNING r.token = $2 AS won, r.state, r.fingerprint, r.data`

// BenchmarkClaimCompleted measures a claim of one completed key (a replay
// of one hot key) at 1 and 16 goroutines, against the floor of a plain
// SELECT of the row and against the statement of earlier releases
// (claim-old), in the same run. It reports ops/s. paired alternates a
// SELECT and a claim at one goroutine, so that both see the same load, and
// reports the median latency of each and their ratio (claim/select). claim-old runs on a
// table of its own, so that the row versions it leaves behind slow no
// other case.
func BenchmarkClaimCompleted(b *testing.B) {
	key, fp, data := benchKey(1), []byte("fingerprint"), []byte(strings.Repeat("x", 200))
	s, pool, quoted := completedStore(b, key, fp, data)
	_, _, oldQuoted := completedStore(b, key, fp, data)
	selectSQL := "SELECT state, fingerprint, data FROM " + quoted + " WHERE key = $1 AND expires_at > clock_timestamp()"
	oldSQL := strings.ReplaceAll(oldClaimSQL, "{t}", oldQuoted)
	lease := int64(time.Hour / time.Microsecond)
	ops := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"select", func(ctx context.Context) error {
			return scanReplay(ctx, pool, selectSQL, nil, []byte(key))
		}},
		{"claim", func(ctx context.Context) error {
			c, err := s.Claim(ctx, key, fp, time.Hour, store.ClaimOptions{})
			if err == nil && c.Won() {
				return errors.New("a replay won the key")
			}
			return err
		}},
		{"claim-old", func(ctx context.Context) error {
			var won bool
			return scanReplay(ctx, pool, oldSQL, &won, []byte(key), []byte(rand.Text()), fp, lease)
		}},
	}
	b.Run("goroutines=1/paired", func(b *testing.B) {
		b.ReportAllocs()
		sel := make([]time.Duration, 0, b.N)
		claim := make([]time.Duration, 0, b.N)
		ctx := context.Background()
		for b.Loop() {
			for i, lat := range []*[]time.Duration{&sel, &claim} {
				start := time.Now()
				if err := ops[i].op(ctx); err != nil {
					b.Fatal(err)
				}
				*lat = append(*lat, time.Since(start))
			}
		}
		ms, mc := median(sel), median(claim)
		b.ReportMetric(float64(ms.Nanoseconds()), "select-ns")
		b.ReportMetric(float64(mc.Nanoseconds()), "claim-ns")
		b.ReportMetric(float64(mc)/float64(ms), "claim/select")
	})
	for _, goroutines := range []int{1, 16} {
		for _, o := range ops {
			b.Run("goroutines="+strconv.Itoa(goroutines)+"/"+o.name, func(b *testing.B) {
				b.ReportAllocs()
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				for range goroutines {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							if err := o.op(context.Background()); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			})
		}
	}
}

// median returns the median of lat, which it sorts.
func median(lat []time.Duration) time.Duration {
	slices.Sort(lat)
	return lat[len(lat)/2]
}

// completedStore returns a store on a table of its own whose key is
// completed with data, its pool and its quoted table name.
func completedStore(b *testing.B, key string, fp, data []byte) (*postgresstore.Store, *pgxpool.Pool, string) {
	b.Helper()
	s, pool := newStore(b, 16, postgresstore.WithSweepInterval(0))
	schema, name, _ := strings.Cut(tableOf(b, s), ".")
	c, err := s.Claim(b.Context(), key, fp, time.Hour, store.ClaimOptions{})
	if err != nil || !c.Won() {
		b.Fatalf("claim: won=%v err=%v", c.Won(), err)
	}
	if err := s.Complete(b.Context(), key, c.Token, data, time.Hour); err != nil {
		b.Fatal(err)
	}
	return s, pool, pgx.Identifier{schema, name}.Sanitize()
}

// scanReplay runs sql on pool and scans its one row: won first when won is
// not nil, then state, fingerprint and data.
func scanReplay(ctx context.Context, pool *pgxpool.Pool, sql string, won *bool, args ...any) error {
	var (
		state    int16
		fp, data []byte
	)
	dest := []any{&state, &fp, &data}
	if won != nil {
		dest = append([]any{won}, dest...)
	}
	return pool.QueryRow(ctx, sql, args...).Scan(dest...)
}
