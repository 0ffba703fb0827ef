package idempotency_test

import (
	"context"
	"crypto/rand"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// pgLedger is a schema of its own in the package's test database, holding
// the store's table and a ledger, shared by the servers of one test, which
// stand for the replicas of one payments service.
type pgLedger struct {
	schema string
	admin  *pgxpool.Pool // direct, for setup and checks
}

func newPGLedger(t *testing.T) *pgLedger {
	t.Helper()
	admin := pgtest.Pool(t, 2)
	schema := "p_" + strings.ToLower(rand.Text()[:12])
	ddl := "CREATE SCHEMA " + schema + "; CREATE TABLE " + schema + ".ledger (payload text NOT NULL, server int NOT NULL)"
	if _, err := admin.Exec(t.Context(), ddl); err != nil {
		t.Fatal(err)
	}
	l := &pgLedger{schema: schema, admin: admin}
	s := postgresstore.New(admin, postgresstore.WithTable(l.records()), postgresstore.WithSweepInterval(0))
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *pgLedger) records() string { return l.schema + ".records" }

// rows counts the ledger rows of payload.
func (l *pgLedger) rows(t *testing.T, payload string) int {
	t.Helper()
	var n int
	if err := l.admin.QueryRow(t.Context(), "SELECT count(*) FROM "+l.schema+".ledger WHERE payload = $1", payload).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// states returns the state of every row of the store's table.
func (l *pgLedger) states(t *testing.T) []int {
	t.Helper()
	rows, err := l.admin.Query(t.Context(), "SELECT state FROM "+l.records()+" ORDER BY state")
	if err != nil {
		t.Fatal(err)
	}
	states, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return states
}

// pgServer is one replica: a gRPC server ([testkit.Serve]) whose
// interceptor claims on its own pool, and whose handler writes the ledger
// and records its outcome in one transaction on the handler's pool,
// through a fault proxy when asked.
type pgServer struct {
	id     int
	store  *postgresstore.Store
	db     *pgxpool.Pool     // the handler's pool
	proxy  *faultproxy.Proxy // between db and PostgreSQL; nil when direct
	srv    *testserver.Server
	client testingv1.TestServiceClient
	events *events
	ledger *pgLedger
}

// pgHooks are points in the handler's transaction where a test acts.
type pgHooks struct {
	// beforeComplete runs after the ledger row is written, before
	// CompleteTx.
	beforeComplete func(ctx context.Context, s *pgServer)
	// beforeCommit runs after CompleteTx, before the commit.
	beforeCommit func(ctx context.Context, s *pgServer)
	// afterCommit runs after a successful commit.
	afterCommit func(ctx context.Context, s *pgServer)
	// completeErr receives CompleteTx's error, when set.
	completeErr chan<- error
}

type pgServerConfig struct {
	id       int
	proxied  bool              // the handler's pool goes through a fault proxy
	maxConns int32             // of each pool; default 2
	params   map[string]string // session settings of the handler's pool
	hooks    pgHooks
	opts     []idempotency.ServerOption
	client   []idempotency.ClientOption
}

func (l *pgLedger) server(t *testing.T, c pgServerConfig) *pgServer {
	t.Helper()
	if c.maxConns == 0 {
		c.maxConns = 2
	}
	s := &pgServer{id: c.id, ledger: l}
	storePool := pgtest.Pool(t, c.maxConns)
	s.store = postgresstore.New(storePool, postgresstore.WithTable(l.records()), postgresstore.WithSweepInterval(0))
	t.Cleanup(func() { _ = s.store.Close() })
	s.db = storePool
	if c.proxied {
		cfg := pgtest.Config(t, c.maxConns)
		for k, v := range c.params {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
		p, err := faultproxy.New(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", proxyPort(t, p)
		s.proxy, s.db = p, pgtest.PoolFrom(t, cfg)
	}
	recovered := recovery.UnaryServerInterceptor(recovery.WithRecoveryHandler(func(any) error {
		return status.Error(codes.Internal, "internal error")
	}))
	r := testkit.Serve(t, testkit.Config{Handler: s.charge(c.hooks), Store: s.store, Options: c.opts,
		Outer: []grpc.UnaryServerInterceptor{recovered}})
	s.srv, s.events = r.Server, r.Events
	s.client = s.srv.Client(t, grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor(c.client...)))
	return s
}

// charge writes a ledger row and records the response in the same
// transaction; a failed CompleteTx or commit answers UNAVAILABLE.
func (s *pgServer) charge(h pgHooks) testserver.HandlerFunc {
	return func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		tx, err := s.db.Begin(ctx)
		if err != nil {
			return nil, status.Error(codes.Unavailable, "begin: "+err.Error())
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if _, err := tx.Exec(ctx, "INSERT INTO "+s.ledger.schema+".ledger (payload, server) VALUES ($1, $2)", req.GetPayload(), s.id); err != nil {
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
		if err := tx.Commit(ctx); err != nil {
			return nil, status.Error(codes.Unavailable, "commit: "+err.Error())
		}
		if h.afterCommit != nil {
			h.afterCommit(ctx, s)
		}
		return resp, nil
	}
}

// proxyPort is the port clients of p dial.
func proxyPort(t *testing.T, p *faultproxy.Proxy) uint16 {
	t.Helper()
	_, port, err := net.SplitHostPort(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	return uint16(n)
}
