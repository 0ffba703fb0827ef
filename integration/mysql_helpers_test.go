package idempotency_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// myLedger is a store table and a ledger table of their own in the
// package's MySQL test database, shared by the servers of one test, which
// stand for the replicas of one payments service.
type myLedger struct {
	prefix string
	admin  *sql.DB // direct, for setup and checks
}

func newMyLedger(t *testing.T) *myLedger {
	t.Helper()
	admin := mysqltest.DB(t, 2)
	l := &myLedger{prefix: "m_" + strings.ToLower(rand.Text()[:12]), admin: admin}
	if _, err := admin.ExecContext(t.Context(), "CREATE TABLE "+l.ledger()+" (payload VARCHAR(100) NOT NULL, server INT NOT NULL) ENGINE = InnoDB"); err != nil {
		t.Fatal(err)
	}
	s := mysqlstore.New(admin, mysqlstore.WithTable(l.records()), mysqlstore.WithSweepInterval(0))
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *myLedger) records() string { return l.prefix + "_records" }
func (l *myLedger) ledger() string  { return l.prefix + "_ledger" }

// store returns a store on the ledger's table, on a pool of maxConns
// connections of its own, closed when t ends.
func (l *myLedger) store(t *testing.T, maxConns int) *mysqlstore.Store {
	t.Helper()
	s := mysqlstore.New(mysqltest.DB(t, maxConns), mysqlstore.WithTable(l.records()), mysqlstore.WithSweepInterval(0))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// mysqlStore is a constructor of storeBackends' kind: a MySQL store on a
// table of its own.
func mysqlStore(t *testing.T) store.Store {
	t.Helper()
	return newMyLedger(t).store(t, 8)
}

// rows counts the ledger rows of payload.
func (l *myLedger) rows(t *testing.T, payload string) int {
	t.Helper()
	var n int
	if err := l.admin.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+l.ledger()+" WHERE payload = ?", payload).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// states returns the state of every row of the store's table, in order.
func (l *myLedger) states(t *testing.T) []int {
	t.Helper()
	rows, err := l.admin.QueryContext(t.Context(), "SELECT state FROM "+l.records()+" ORDER BY state")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var states []int
	for rows.Next() {
		var s int
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		states = append(states, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return states
}

// myServer is one replica: a gRPC server ([testkit.Serve]) whose
// interceptor claims on its own pool, and whose handler writes the ledger
// and records its outcome in one transaction on the handler's pool,
// through a fault proxy when asked.
type myServer struct {
	id     int
	store  *mysqlstore.Store
	db     *sql.DB           // the handler's pool
	proxy  *faultproxy.Proxy // between db and the server; nil when direct
	srv    *testserver.Server
	client testingv1.TestServiceClient
	events *events
	ledger *myLedger
}

// myHooks are points in the handler's transaction where a test acts.
type myHooks struct {
	// beforeComplete runs after the ledger row is written, before
	// CompleteTx.
	beforeComplete func(ctx context.Context, s *myServer)
	// beforeCommit runs after CompleteTx, before the commit.
	beforeCommit func(ctx context.Context, s *myServer)
	// afterCommit runs after a successful commit.
	afterCommit func(ctx context.Context, s *myServer)
	// completeErr receives CompleteTx's error, when set.
	completeErr chan<- error
}

type myServerConfig struct {
	id       int
	proxied  bool // the handler's pool goes through a fault proxy
	maxConns int  // of each pool; default 2
	hooks    myHooks
	// handler, when set, is the handler instead of charge.
	handler func(s *myServer) testserver.HandlerFunc
	opts    []idempotency.ServerOption
	client  []idempotency.ClientOption
}

func (l *myLedger) server(t *testing.T, c myServerConfig) *myServer {
	t.Helper()
	if c.maxConns == 0 {
		c.maxConns = 2
	}
	s := &myServer{id: c.id, ledger: l}
	storeDB := mysqltest.DB(t, c.maxConns)
	s.store = mysqlstore.New(storeDB, mysqlstore.WithTable(l.records()), mysqlstore.WithSweepInterval(0))
	t.Cleanup(func() { _ = s.store.Close() })
	s.db = storeDB
	if c.proxied {
		cfg := mysqltest.Config(t)
		p, err := faultproxy.New(cfg.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		cfg.Addr = p.Addr()
		s.proxy, s.db = p, mysqltest.DBFrom(t, cfg, c.maxConns)
	}
	recovered := recovery.UnaryServerInterceptor(recovery.WithRecoveryHandler(func(any) error {
		return status.Error(codes.Internal, "internal error")
	}))
	h := s.charge(c.hooks)
	if c.handler != nil {
		h = c.handler(s)
	}
	r := testkit.Serve(t, testkit.Config{Handler: h, Store: s.store, Options: c.opts,
		Outer: []grpc.UnaryServerInterceptor{recovered}})
	s.srv, s.events = r.Server, r.Events
	s.client = s.srv.Client(t, grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor(c.client...)))
	return s
}

// charge writes a ledger row and records the response in the same
// transaction; a failed CompleteTx or commit answers UNAVAILABLE.
func (s *myServer) charge(h myHooks) testserver.HandlerFunc {
	return func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, status.Error(codes.Unavailable, "begin: "+err.Error())
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+s.ledger.ledger()+" (payload, server) VALUES (?, ?)", req.GetPayload(), s.id); err != nil {
			return nil, status.Error(codes.Unavailable, "ledger: "+err.Error())
		}
		if h.beforeComplete != nil {
			h.beforeComplete(ctx, s)
		}
		resp := &testingv1.DoResponse{Payload: req.GetPayload(), Amount: int64(s.id)}
		err = s.store.CompleteTx(ctx, tx, resp)
		if h.completeErr != nil {
			h.completeErr <- err
		}
		if err != nil {
			return nil, status.Error(codes.Unavailable, "claim lost: rolled back")
		}
		if h.beforeCommit != nil {
			h.beforeCommit(ctx, s)
		}
		if err := tx.Commit(); err != nil {
			return nil, status.Error(codes.Unavailable, "commit: "+err.Error())
		}
		if h.afterCommit != nil {
			h.afterCommit(ctx, s)
		}
		return resp, nil
	}
}
