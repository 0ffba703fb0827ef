package idempotency_test

import (
	"context"
	"crypto/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// benchPoolConns is the size of each benchmark pool.
const benchPoolConns = 8

// BenchmarkUnaryPostgres is BenchmarkUnary's comparison on the PostgreSQL
// store; compare its rows with BenchmarkUnary/bare of the same run.
//
//   - postgres-executed and postgres-replay: the Echo handler behind the
//     interceptor, a new key per call or one stored key. roundtrips/op
//     counts the store's statements (claim, then complete: 2; a replay's
//     claim: 1).
//   - postgres-ceiling-*: the same store statements with the same
//     concurrency and no gRPC: what loopback PostgreSQL allows here.
//   - postgres-floor-*: the store floor (floor_store_bench_test.go), a
//     bare handler that runs PostgreSQL's least for the path, a SELECT
//     for a replay, an INSERT … ON CONFLICT DO NOTHING and an UPDATE for
//     an executed call: divide the postgres rows by them.
//   - tx-bare: a handler whose transaction writes a ledger row (BEGIN,
//     INSERT, COMMIT), without the interceptor. tx-executed: the same
//     handler behind the interceptor, recording its outcome with
//     CompleteTx inside its transaction: roundtrips/op counts the claim and
//     the CompleteTx statement (2), and after-handler/op the store calls
//     the interceptor made once the handler returned (0).
func BenchmarkUnaryPostgres(b *testing.B) {
	for _, path := range []string{"executed", "replay"} {
		replay := path == "replay"
		b.Run("postgres-"+path, func(b *testing.B) {
			s, trips, _ := benchPostgres(b)
			client := serve(b, s)
			benchtest.ForCallers(b, func(b *testing.B, callers int) {
				trips.Reset()
				benchCalls(b, client, callers, replay, nil)
				b.ReportMetric(float64(trips.Queries()+trips.Prepares())/float64(b.N), "roundtrips/op")
			})
		})
		b.Run("postgres-ceiling-"+path, func(b *testing.B) {
			s, _, _ := benchPostgres(b)
			benchtest.ForCallers(b, func(b *testing.B, callers int) { benchStore(b, s, callers, replay, nil) })
		})
		b.Run("postgres-floor-"+path, func(b *testing.B) {
			fs, trips := newPostgresFloor(b)
			benchFloor(b, fs, replay, floorCounter{
				reset: func(*testing.B) { trips.Reset() },
				report: func(b *testing.B) {
					b.ReportMetric(float64(trips.Queries()+trips.Prepares())/float64(b.N), "roundtrips/op")
				},
			})
		})
	}
	for _, withStore := range []bool{false, true} {
		name := "tx-bare"
		if withStore {
			name = "tx-executed"
		}
		b.Run(name, func(b *testing.B) {
			s, trips, pool := benchPostgres(b)
			ledger := benchLedger(b, pool)
			counted := &afterHandler{Store: s}
			h := ledger.handler(s, withStore)
			var opts []grpc.ServerOption
			if withStore {
				opts = append(opts, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(counted)))
			}
			client := testserver.New(b, &testserver.Service{Handler: h}, opts...).Client(b)
			benchtest.ForCallers(b, func(b *testing.B, callers int) {
				trips.Reset()
				counted.calls.Store(0)
				benchCalls(b, client, callers, false, nil)
				if withStore {
					b.ReportMetric(float64(trips.Queries()+trips.Prepares())/float64(b.N), "roundtrips/op")
					b.ReportMetric(float64(counted.calls.Load())/float64(b.N), "after-handler/op")
				}
			})
		})
	}
}

// benchPostgres returns a migrated store on a table of its own, with a
// round-trip counter on the table's statements, and its pool.
func benchPostgres(b *testing.B) (*postgresstore.Store, *pgtest.RoundTrips, *pgxpool.Pool) {
	b.Helper()
	table, trips, pool := benchPostgresPool(b, "bench_")
	s := postgresstore.New(pool, postgresstore.WithTable(table))
	b.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	return s, trips, pool
}

// benchPostgresPool returns a new table name that starts with prefix, a
// pool of benchPoolConns connections, and a round-trip counter on the
// statements about that table.
func benchPostgresPool(b *testing.B, prefix string) (string, *pgtest.RoundTrips, *pgxpool.Pool) {
	b.Helper()
	table := prefix + strings.ToLower(rand.Text()[:10])
	trips := &pgtest.RoundTrips{Match: table}
	cfg := pgtest.Config(b, benchPoolConns)
	cfg.ConnConfig.Tracer = trips
	return table, trips, pgtest.PoolFrom(b, cfg)
}

// afterHandler counts the Complete and Release calls the interceptor
// makes: with transactional completion, none.
type afterHandler struct {
	*postgresstore.Store
	calls atomic.Int64
}

func (a *afterHandler) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	a.calls.Add(1)
	return a.Store.Complete(ctx, key, token, data, retention)
}

func (a *afterHandler) Release(ctx context.Context, key, token string) error {
	a.calls.Add(1)
	return a.Store.Release(ctx, key, token)
}

var _ store.Store = (*afterHandler)(nil)

// benchLedgerTable is a ledger for the transactional rows.
type benchLedgerTable struct {
	pool *pgxpool.Pool
	name string
}

func benchLedger(b *testing.B, pool *pgxpool.Pool) *benchLedgerTable {
	b.Helper()
	name := "ledger_" + strings.ToLower(rand.Text()[:10])
	if _, err := pool.Exec(b.Context(), "CREATE TABLE "+name+" (payload text NOT NULL, amount bigint NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	return &benchLedgerTable{pool: pool, name: name}
}

// handler writes a ledger row in a transaction and, with the store,
// records the response in it.
func (l *benchLedgerTable) handler(s *postgresstore.Store, record bool) testserver.HandlerFunc {
	insert := "INSERT INTO " + l.name + " (payload, amount) VALUES ($1, $2)"
	return func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tx, err := l.pool.Begin(ctx)
		if err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, insert, req.GetPayload(), req.GetAmount()); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		resp := &testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount()}
		if record {
			if err := s.CompleteTx(ctx, tx, resp); err != nil {
				return nil, status.Error(codes.Unavailable, err.Error())
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		return resp, nil
	}
}
