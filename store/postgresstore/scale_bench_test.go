package postgresstore_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
)

// benchKey returns a key shaped like the interceptor's: a SHA-256 (the
// interceptor sends its base64url text; the table holds the bytes).
func benchKey(i int) string {
	sum := sha256.Sum256(binary.AppendUvarint(nil, uint64(i)))
	return string(sum[:])
}

// fillSQL writes $1 completed rows with a 200-byte outcome, kept an hour,
// and $1/10 more that expire one after another over the next ten minutes:
// steady work for the sweeper in proportion to the table's size, as
// retentions running out give it (1M rows: about 170 a second, a
// retention of about 100 minutes at that call rate).
const fillSQL = `
INSERT INTO %s (key, state, token, fingerprint, data, expires_at)
SELECT sha256(int8send(i)), 2, '\x00', sha256(int8send(-i)), convert_to(repeat('x', 200), 'UTF8'),
	clock_timestamp() + CASE WHEN i <= $1 THEN interval '1 hour' ELSE (i %% 600) * interval '1 second' END
FROM generate_series(1, $1 + $1 / 10) AS i`

// BenchmarkPostgresScale measures the latency of a claim of a new key
// (released afterwards, so the table keeps its size) and of a replay (a
// claim that finds a completed key), with 1,000 and 1,000,000 rows in the
// table and the store's sweeper running (every second, batches of 1000) on
// a tenth as many rows again that expire over the first ten minutes. It
// reports p50, p99 and the worst latency per operation
// ([benchtest.ReportLatency]), and how many rows the sweeper had deleted by
// the end.
func BenchmarkPostgresScale(b *testing.B) {
	for _, n := range benchtest.Sizes(1_000, 1_000_000) {
		b.Run("records="+strconv.Itoa(n), func(b *testing.B) {
			var swept atomic.Int64
			s, _ := newStore(b, 4, postgresstore.WithSweepInterval(time.Second),
				postgresstore.WithSweepReport(func(d int64, err error) { swept.Add(d) }))
			pool, table := poolOf(b, s), tableOf(b, s)
			if _, err := pool.Exec(b.Context(), fmt.Sprintf(fillSQL, table), n); err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(b.Context(), "VACUUM ANALYZE "+table); err != nil {
				b.Fatal(err)
			}
			fp := sha256.Sum256([]byte("fingerprint"))
			b.Run("claim", func(b *testing.B) {
				benchtest.ClaimNew(b, s, fp[:], 2*n, benchKey)
				b.ReportMetric(float64(swept.Load()), "swept")
			})
			b.Run("replay", func(b *testing.B) {
				// 512 live rows spread over the table: the same working
				// set at every size.
				keys := make([]string, 0, 512)
				for i := 1; len(keys) < cap(keys); i += max(1, n/600) {
					keys = append(keys, string(int8Key(i)))
				}
				benchtest.ClaimCompleted(b, s, fp[:], keys)
			})
		})
	}
}

// int8Key is the key fillSQL gives row i: sha256(int8send(i)).
func int8Key(i int) []byte {
	sum := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
	return sum[:]
}
