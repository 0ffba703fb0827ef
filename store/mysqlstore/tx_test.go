package mysqlstore_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

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
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// txFixture is a gRPC server whose handler writes a ledger row and records
// its outcome with CompleteTx in one transaction. The interceptor reaches
// the store through a recording fault store, to count its own calls.
type txFixture struct {
	store  *mysqlstore.Store
	db     *sql.DB
	ledger string // the ledger table, beside the store's
	calls  *faultstore.Store
	srv    *testserver.Server
	client testingv1.TestServiceClient
	events *testkit.Events
}

type txHandler func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error)

func newTxFixture(t *testing.T, h txHandler, opts ...idempotency.ServerOption) *txFixture {
	t.Helper()
	s, db := newStore(t, 4)
	return newTxFixtureOn(t, s, db, h, opts...)
}

// newTxFixtureOn is newTxFixture on the store s and the handler's pool.
func newTxFixtureOn(t *testing.T, s *mysqlstore.Store, db *sql.DB, h txHandler, opts ...idempotency.ServerOption) *txFixture {
	t.Helper()
	ledger := tableOf(t, s) + "_ledger"
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+ledger+" (payload VARCHAR(100) NOT NULL) ENGINE = InnoDB"); err != nil {
		t.Fatal(err)
	}
	f := &txFixture{store: s, db: db, ledger: ledger, calls: faultstore.New(s), events: &testkit.Events{}}
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
	if err := f.db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+f.ledger+" WHERE payload = ?", payload).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// charge is the handler's usual transaction: a ledger row, then the
// outcome, then the commit.
func charge(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+f.ledger+" (payload) VALUES (?)", req.GetPayload()); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	resp := &testingv1.DoResponse{Payload: req.GetPayload()}
	if err := f.store.CompleteTx(ctx, tx, resp); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if err := tx.Commit(); err != nil {
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

// TestDuplicateNotBlockedByTheTransaction: while the handler's transaction
// holds the key's row after CompleteTx, a duplicate of the call is
// answered at once: ABORTED, in use (its claim, a plain read, sees the
// claim in flight), where a locking claim would wait for the commit.
// After the commit, the duplicate's retry replays.
func TestDuplicateNotBlockedByTheTransaction(t *testing.T) {
	t.Parallel()
	recorded, commit := make(chan struct{}), make(chan struct{})
	f := newTxFixture(t, func(ctx context.Context, f *txFixture, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tx, err := f.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+f.ledger+" (payload) VALUES (?)", req.GetPayload()); err != nil {
			return nil, err
		}
		resp := &testingv1.DoResponse{Payload: req.GetPayload()}
		if err := f.store.CompleteTx(ctx, tx, resp); err != nil {
			return nil, err
		}
		close(recorded)
		<-commit
		return resp, tx.Commit()
	})
	ctx := keyed(t.Context(), "k")
	first := make(chan error, 1)
	go func() {
		_, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "held"})
		first <- err
	}()
	<-recorded
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := f.client.Do(dctx, &testingv1.DoRequest{Payload: "held"})
	cancel()
	testkit.WantReason(t, err, codes.Aborted, "IDEMPOTENCY_KEY_IN_USE")
	close(commit)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	var header metadata.MD
	if _, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "held"}, grpc.Header(&header)); err != nil || !replayed(header, nil) {
		t.Fatalf("retry after the commit: %v, replayed=%v", err, replayed(header, nil))
	}
	if n := f.ledgerRows(t, "held"); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
}

// TestCompleteTxSuite runs the transactional-completion suite of the SQL
// stores (internal/test/sqltxtest) on MySQL.
func TestCompleteTxSuite(t *testing.T) {
	t.Parallel()
	sqltxtest.Run(t, func(t *testing.T) sqltxtest.Rig {
		s, db := newStore(t, 4)
		ledger := tableOf(t, s) + "_ledger"
		if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+ledger+" (payload VARCHAR(100) NOT NULL) ENGINE = InnoDB"); err != nil {
			t.Fatal(err)
		}
		return sqltxtest.Rig{
			Store: s,
			Begin: func(ctx context.Context) (sqltxtest.Tx, error) {
				tx, err := db.BeginTx(ctx, nil)
				return &sqlTx{s: s, tx: tx, ledger: ledger}, err
			},
			LedgerRows: func(t *testing.T, payload string) int {
				t.Helper()
				var n int
				if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+ledger+" WHERE payload = ?", payload).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
			ExpireAll: func(t *testing.T) {
				if _, err := db.ExecContext(t.Context(), "UPDATE "+tableOf(t, s)+" SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

// sqlTx is a handler's transaction as sqltxtest drives it.
type sqlTx struct {
	s      *mysqlstore.Store
	tx     *sql.Tx
	ledger string
}

func (x *sqlTx) Charge(ctx context.Context, payload string) error {
	_, err := x.tx.ExecContext(ctx, "INSERT INTO "+x.ledger+" (payload) VALUES (?)", payload)
	return err
}

func (x *sqlTx) CompleteTx(ctx context.Context, resp proto.Message) error {
	return x.s.CompleteTx(ctx, x.tx, resp)
}

func (x *sqlTx) CompleteErrorTx(ctx context.Context, err error) error {
	return x.s.CompleteErrorTx(ctx, x.tx, err)
}

func (x *sqlTx) Commit(context.Context) error   { return x.tx.Commit() }
func (x *sqlTx) Rollback(context.Context) error { return x.tx.Rollback() }
