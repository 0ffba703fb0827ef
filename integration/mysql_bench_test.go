package idempotency_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// BenchmarkUnaryMySQL is BenchmarkUnary's comparison on the MySQL store
// (MariaDB here), with a bare row of its own run to divide by:
//
//   - bare: the bufconn unary call with no interceptor.
//   - mysql-executed and mysql-replay: the Echo handler behind the
//     interceptor, a new key per call or one stored key. roundtrips/op
//     counts, on the wire, the statements run on the store's table
//     (executed: the SELECT, the INSERT and the complete, 3; a replay's
//     SELECT, 1); the preparation of each statement, once per connection,
//     is left out.
//   - mysql-ceiling-*: the same store steps with the same concurrency and
//     no gRPC: what loopback MariaDB allows here.
//   - mysql-floor-*: the store floor (floor_store_bench_test.go), a bare
//     handler that runs MySQL's least for the path, a prepared SELECT for
//     a replay, an INSERT IGNORE and an UPDATE for an executed call:
//     divide the mysql rows by them.
//   - mysql-tx-bare: a handler whose transaction writes a ledger row
//     (BEGIN, INSERT, COMMIT), without the interceptor. mysql-tx-executed:
//     the same handler behind the interceptor, recording its outcome with
//     CompleteTx inside its transaction: roundtrips/op counts the claim's
//     two statements and CompleteTx (3), and after-handler/op the store
//     calls the interceptor made once the handler returned (0).
func BenchmarkUnaryMySQL(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		client := testserver.New(b, &testserver.Service{}).Client(b)
		benchtest.ForCallers(b, func(b *testing.B, callers int) { benchCalls(b, client, callers, false, nil) })
	})
	for _, path := range []string{"executed", "replay"} {
		replay := path == "replay"
		b.Run("mysql-"+path, func(b *testing.B) {
			s, trips, _ := benchMySQL(b)
			client := serve(b, s)
			benchtest.ForCallers(b, func(b *testing.B, callers int) {
				benchCalls(b, client, callers, replay, trips.Reset)
				b.ReportMetric(float64(trips.Statements())/float64(b.N), "roundtrips/op")
			})
		})
		b.Run("mysql-ceiling-"+path, func(b *testing.B) {
			s, _, _ := benchMySQL(b)
			benchtest.ForCallers(b, func(b *testing.B, callers int) { benchStore(b, s, callers, replay, nil) })
		})
		b.Run("mysql-floor-"+path, func(b *testing.B) {
			fs, trips := newMySQLFloor(b)
			benchFloor(b, fs, replay, floorCounter{
				reset:  func(*testing.B) { trips.Reset() },
				report: func(b *testing.B) { b.ReportMetric(float64(trips.Statements())/float64(b.N), "roundtrips/op") },
			})
		})
	}
	for _, withStore := range []bool{false, true} {
		name := "mysql-tx-bare"
		if withStore {
			name = "mysql-tx-executed"
		}
		b.Run(name, func(b *testing.B) {
			s, trips, db := benchMySQL(b)
			h := mysqlBenchHandler(b, db, s, withStore)
			counted := &afterHandlerMySQL{Store: s}
			var opts []grpc.ServerOption
			if withStore {
				opts = append(opts, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(counted)))
			}
			client := testserver.New(b, &testserver.Service{Handler: h}, opts...).Client(b)
			benchtest.ForCallers(b, func(b *testing.B, callers int) {
				counted.calls.Store(0)
				benchCalls(b, client, callers, false, trips.Reset)
				if withStore {
					b.ReportMetric(float64(trips.Statements())/float64(b.N), "roundtrips/op")
					b.ReportMetric(float64(counted.calls.Load())/float64(b.N), "after-handler/op")
				}
			})
		})
	}
}

// benchMySQL returns a migrated store on a table of its own, on a pool of
// benchPoolConns connections that counts the round trips about the table,
// and the pool.
func benchMySQL(b *testing.B) (*mysqlstore.Store, *mysqltest.RoundTrips, *sql.DB) {
	b.Helper()
	table, trips, db := benchMySQLDB(b, "bench_")
	s := mysqlstore.New(db, mysqlstore.WithTable(table))
	b.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	return s, trips, db
}

// benchMySQLDB returns a new table name that starts with prefix, a pool
// of benchPoolConns connections, and a round-trip counter on the
// statements about that table (quoted).
func benchMySQLDB(b *testing.B, prefix string) (string, *mysqltest.RoundTrips, *sql.DB) {
	b.Helper()
	table := prefix + strings.ToLower(rand.Text()[:10])
	trips := &mysqltest.RoundTrips{Match: "`" + table + "`"}
	cfg := mysqltest.Config(b)
	trips.Install(cfg)
	return table, trips, mysqltest.DBFrom(b, cfg, benchPoolConns)
}

// mysqlBenchHandler writes a ledger row in a transaction and, with record,
// records the response in it.
func mysqlBenchHandler(b *testing.B, db *sql.DB, s *mysqlstore.Store, record bool) testserver.HandlerFunc {
	b.Helper()
	ledger := "ledger_" + strings.ToLower(rand.Text()[:10])
	if _, err := db.ExecContext(b.Context(), "CREATE TABLE "+ledger+" (payload VARCHAR(100) NOT NULL, amount BIGINT NOT NULL) ENGINE = InnoDB"); err != nil {
		b.Fatal(err)
	}
	insert := "INSERT INTO " + ledger + " (payload, amount) VALUES (?, ?)"
	return func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, insert, req.GetPayload(), req.GetAmount()); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		resp := &testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount()}
		if record {
			if err := s.CompleteTx(ctx, tx, resp); err != nil {
				return nil, status.Error(codes.Unavailable, err.Error())
			}
		}
		if err := tx.Commit(); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		return resp, nil
	}
}

// afterHandlerMySQL counts the Complete and Release calls the interceptor
// makes: with transactional completion, none.
type afterHandlerMySQL struct {
	*mysqlstore.Store
	calls atomic.Int64
}

func (a *afterHandlerMySQL) Complete(ctx context.Context, key, token string, data []byte, retention time.Duration) error {
	a.calls.Add(1)
	return a.Store.Complete(ctx, key, token, data, retention)
}

func (a *afterHandlerMySQL) Release(ctx context.Context, key, token string) error {
	a.calls.Add(1)
	return a.Store.Release(ctx, key, token)
}

var _ store.Store = (*afterHandlerMySQL)(nil)
