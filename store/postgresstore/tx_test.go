package postgresstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/sqltxtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
)

// txFixture is a gRPC server whose handler writes a ledger row and records
// its outcome with CompleteTx in one transaction. The interceptor reaches
// the store through a recording fault store, to count its own calls.
type txFixture struct {
	store  *postgresstore.Store
	pool   *pgxpool.Pool
	ledger string // the ledger table, in the store's schema
	calls  *faultstore.Store
	srv    *testserver.Server
	client testingv1.TestServiceClient
	events *testkit.Events
}

type txHandler func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error)

func newTxFixture(t *testing.T, h txHandler, opts ...idempotency.ServerOption) *txFixture {
	t.Helper()
	s, pool := newStore(t, 4)
	return newTxFixtureOn(t, s, pool, h, opts...)
}

// newTxFixtureOn is newTxFixture on the store s and the handler's pool.
func newTxFixtureOn(t *testing.T, s *postgresstore.Store, pool *pgxpool.Pool, h txHandler, opts ...idempotency.ServerOption) *txFixture {
	t.Helper()
	ledger := strings.TrimSuffix(tableOf(t, s), ".records") + ".ledger"
	if _, err := pool.Exec(t.Context(), "CREATE TABLE "+ledger+" (payload text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	f := &txFixture{store: s, pool: pool, ledger: ledger, calls: faultstore.New(s), events: &testkit.Events{}}
	opts = append([]idempotency.ServerOption{idempotency.WithObserver(f.events)}, opts...)
	f.srv = testserver.New(t, &testserver.Service{Handler: func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return h(ctx, f, req)
	}}, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(f.calls, opts...)))
	f.client = f.srv.Client(t)
	return f
}

// ledgerRows counts the ledger rows of payload.
func (f *txFixture) ledgerRows(t *testing.T, payload string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(t.Context(), "SELECT count(*) FROM "+f.ledger+" WHERE payload = $1", payload).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// charge is the handler's usual transaction: a ledger row, then the
// outcome, then the commit.
func charge(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "INSERT INTO "+f.ledger+" (payload) VALUES ($1)", req.GetPayload()); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &testingv1.DoResponse{Payload: req.GetPayload()}
	if err := f.store.CompleteTx(ctx, tx, resp); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	return resp, nil
}

func keyed(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, key)
}

// replayed reports whether a call's header or trailer carries the replay
// marker.
func replayed(header, trailer metadata.MD) bool {
	return slices.Contains(append(header.Get(idempotency.ReplayedKey), trailer.Get(idempotency.ReplayedKey)...), "true")
}

// TestCompleteTxSuite runs the transactional-completion suite of the SQL
// stores (internal/test/sqltxtest) on PostgreSQL.
func TestCompleteTxSuite(t *testing.T) {
	t.Parallel()
	sqltxtest.Run(t, func(t *testing.T) sqltxtest.Rig {
		s, pool := newStore(t, 4)
		ledger := strings.TrimSuffix(tableOf(t, s), ".records") + ".ledger"
		if _, err := pool.Exec(t.Context(), "CREATE TABLE "+ledger+" (payload text NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		return sqltxtest.Rig{
			Store: s,
			Begin: func(ctx context.Context) (sqltxtest.Tx, error) {
				tx, err := pool.Begin(ctx)
				return &pgTx{s: s, tx: tx, ledger: ledger}, err
			},
			LedgerRows: func(t *testing.T, payload string) int {
				t.Helper()
				var n int
				if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+ledger+" WHERE payload = $1", payload).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
			ExpireAll: func(t *testing.T) {
				if _, err := pool.Exec(t.Context(), "UPDATE "+tableOf(t, s)+" SET expires_at = clock_timestamp() - interval '1 second'"); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

// pgTx is a handler's transaction as sqltxtest drives it.
type pgTx struct {
	s      *postgresstore.Store
	tx     pgx.Tx
	ledger string
}

func (x *pgTx) Charge(ctx context.Context, payload string) error {
	_, err := x.tx.Exec(ctx, "INSERT INTO "+x.ledger+" (payload) VALUES ($1)", payload)
	return err
}

func (x *pgTx) CompleteTx(ctx context.Context, resp proto.Message) error {
	return x.s.CompleteTx(ctx, x.tx, resp)
}

func (x *pgTx) CompleteErrorTx(ctx context.Context, err error) error {
	return x.s.CompleteErrorTx(ctx, x.tx, err)
}

func (x *pgTx) Commit(ctx context.Context) error   { return x.tx.Commit(ctx) }
func (x *pgTx) Rollback(ctx context.Context) error { return x.tx.Rollback(ctx) }
