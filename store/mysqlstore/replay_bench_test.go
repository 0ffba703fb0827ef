package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// BenchmarkClaimCompletedMySQL measures a claim of one completed key (the store
// step of a replay of one hot key) at 1 and 16 goroutines, against the
// floor of a plain SELECT of the row, prepared like the store's own
// statements, in the same run. It reports ops/s. paired alternates a
// SELECT and a claim at one goroutine, so that both see the same load, and
// reports the median latency of each and their ratio (claim/select). Its
// name is not postgresstore's BenchmarkClaimCompleted, which make bench
// reports beside it.
func BenchmarkClaimCompletedMySQL(b *testing.B) {
	key, fp, data := "bench-"+strconv.FormatInt(time.Now().UnixNano(), 36), []byte("fingerprint"), []byte(strings.Repeat("x", 200))
	s, db := newStore(b, 16, mysqlstore.WithSweepInterval(0))
	c, err := s.Claim(b.Context(), key, fp, time.Hour, store.ClaimOptions{})
	if err != nil || !c.Won() {
		b.Fatalf("claim: won=%v err=%v", c.Won(), err)
	}
	if err := s.Complete(b.Context(), key, c.Token, data, time.Hour); err != nil {
		b.Fatal(err)
	}
	sel, err := db.PrepareContext(b.Context(), "SELECT state, fingerprint, data FROM "+tableOf(b, s)+" WHERE `key` = ? AND expires_at > UTC_TIMESTAMP(6)")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sel.Close() })
	ops := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"select", func(ctx context.Context) error { return scanReplay(ctx, sel, []byte(key)) }},
		{"claim", func(ctx context.Context) error {
			c, err := s.Claim(ctx, key, fp, time.Hour, store.ClaimOptions{})
			if err == nil && c.Won() {
				return errors.New("a replay won the key")
			}
			return err
		}},
	}
	b.Run("goroutines=1/paired", func(b *testing.B) {
		b.ReportAllocs()
		lats := [2][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
		ctx := context.Background()
		for b.Loop() {
			for i := range ops {
				start := time.Now()
				if err := ops[i].op(ctx); err != nil {
					b.Fatal(err)
				}
				lats[i] = append(lats[i], time.Since(start))
			}
		}
		ms, mc := median(lats[0]), median(lats[1])
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

// scanReplay runs the prepared SELECT st and scans its one row.
func scanReplay(ctx context.Context, st *sql.Stmt, args ...any) error {
	var (
		state    int64
		fp, data []byte
	)
	return st.QueryRowContext(ctx, args...).Scan(&state, &fp, &data)
}
