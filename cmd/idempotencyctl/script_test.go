package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rogpeppe/go-internal/testscript"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/admin"
	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// mode is a way the scripts reach the store of a running server: its admin
// service over gRPC, or the store itself.
type mode struct {
	name   string
	direct bool   // the store itself, not the admin service
	store  string // memory, redis, postgres, mysql or sqlite
	// topology is a Redis store's: "" (one node), cluster or sentinel.
	topology string
	// mtls serves the admin service over TLS, requiring a client
	// certificate (--tls-ca, --tls-cert, --tls-key).
	mtls bool
}

// modes are every way in, on every store it works with: the admin service
// on each store, and each store but memory directly (a memory store lives
// in its server's process only; a SQLite store is a file on the host), Redis
// as one node, a Cluster and through Sentinel.
var modes = []mode{
	{name: "service-memory", store: "memory"},
	{name: "service-mtls", store: "memory", mtls: true},
	{name: "service-redis", store: "redis"},
	{name: "service-postgres", store: "postgres"},
	{name: "service-mysql", store: "mysql"},
	{name: "service-sqlite", store: "sqlite"},
	{name: "direct-redis", direct: true, store: "redis"},
	{name: "direct-redis-cluster", direct: true, store: "redis", topology: "cluster"},
	{name: "direct-redis-sentinel", direct: true, store: "redis", topology: "sentinel"},
	{name: "direct-postgres", direct: true, store: "postgres"},
	{name: "direct-mysql", direct: true, store: "mysql"},
	{name: "direct-sqlite", direct: true, store: "sqlite"},
}

// condition answers the scripts' conditions: [service], [mtls] and
// [direct] (the way in), [memory], [redis], [postgres], [mysql] and
// [sqlite] (the store).
func (m mode) condition(cond string) (bool, error) {
	switch cond {
	case "mtls":
		return m.mtls, nil
	case "service":
		return !m.direct, nil
	case "direct":
		return m.direct, nil
	case "memory", "redis", "postgres", "mysql", "sqlite":
		return m.store == cond, nil
	}
	return false, errors.New("unknown condition " + cond)
}

// TestScripts runs every script of testdata/script in every mode: each
// script against a server of its own (the shop service behind the
// interceptors of an idempotency.Server over a fresh store, and its admin
// service on a loopback port), with idempotencyctl run as a process of its
// own. The commands the scripts use besides testscript's are in
// commands_test.go.
func TestScripts(t *testing.T) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			// A Cluster or a Sentinel takes seconds to start: the mode's
			// scripts share one, each under a key prefix of its own.
			var shared any
			switch m.topology {
			case "cluster":
				shared = redistest.StartCluster(t)
			case "sentinel":
				shared = redistest.StartSentinel(t)
			}
			testscript.Run(t, testscript.Params{
				Dir:                 filepath.Join("testdata", "script"),
				Setup:               func(env *testscript.Env) error { return setup(env, m, shared) },
				Cmds:                commands,
				Condition:           m.condition,
				RequireExplicitExec: true,
				RequireUniqueNames:  true,
			})
		})
	}
}

// rig is the server of one script.
type rig struct {
	ledger *ledger
	// store is the server's store, which sealcall's server shares and
	// plant writes to.
	store store.Store
	tb    testing.TB
	shop  *grpc.ClientConn
	// flags reach the admin service or the store; ctl adds the operator
	// (service) or the descriptor set (direct).
	flags  []string
	direct bool
	// file is a SQLite store's database file.
	file string
	// descriptors is the path of the shop service's descriptor set.
	descriptors string

	mu      sync.Mutex
	calls   sync.WaitGroup // calls started with call -bg
	answers []string       // their answers, as call prints them
}

type rigKey struct{}

// setup starts the script's server over a fresh store of m's kind.
func setup(env *testscript.Env, m mode, shared any) error {
	tb, ok := env.T().(testing.TB)
	if !ok {
		return errors.New("testscript's T is not a testing.TB")
	}
	r := &rig{ledger: newLedger(), direct: m.direct}
	st, direct := openStore(tb, m, shared)
	r.store, r.tb = st, tb
	if i := slices.Index(direct, "--sqlite"); i >= 0 {
		r.file = direct[i+1]
	}
	files, sd, err := shopFiles()
	if err != nil {
		return err
	}
	opts := []idempotency.ServerOption{
		idempotency.WithDescriptors(files),
		idempotency.WithScope(tenant),
		idempotency.WithMethodPolicy("/"+shopService+"/Capture", idempotency.MethodPolicy{Namespace: captureNamespace}),
	}
	if !m.direct {
		// A purge through the admin service drops the key from its
		// server's replay cache at once (bad_record.txtar); one made
		// directly reaches the servers' caches through the store's
		// invalidations, which this rig's server does not subscribe to.
		opts = append(opts, idempotency.WithReplayCache(1000, 1<<20, time.Hour))
	}
	srv := idempotency.NewServer(st, opts...)
	// Registered before the shop server's stop, so it runs after it: the
	// replay cache's subscription to the store's purges ends with srv.
	tb.Cleanup(func() { _ = srv.Close() })
	shop := testserver.Start(tb, func(s grpc.ServiceRegistrar) { r.ledger.register(s, sd) },
		grpc.ChainUnaryInterceptor(srv.UnaryServerInterceptor()))
	r.shop = shop.Dial(tb, grpc.WithChainUnaryInterceptor(idempotency.UnaryClientInterceptor()))
	// Slow charges still running end before the server stops.
	tb.Cleanup(func() { r.ledger.unblock(); r.calls.Wait() })

	r.descriptors = filepath.Join(env.WorkDir, "shop.binpb")
	set, err := shopDescriptorSet()
	if err != nil {
		return err
	}
	if err := os.WriteFile(r.descriptors, set, 0o600); err != nil {
		return err
	}
	if m.direct {
		r.flags = direct
	} else {
		r.flags, err = startAdmin(tb, env, m, srv)
		if err != nil {
			return err
		}
	}
	env.Values[rigKey{}] = r
	// Under -race, a process sleeps a second before it exits, so that
	// racing goroutines get reported: idempotencyctl's have all ended.
	env.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return nil
}

// startAdmin starts the admin service of srv on a loopback port, over
// mTLS in an mtls mode, and returns the flags that reach it; the scripts
// find its address in $ADMIN_ADDR.
func startAdmin(tb testing.TB, env *testscript.Env, m mode, srv *idempotency.Server) ([]string, error) {
	tb.Helper()
	svc := admin.NewService(srv, authorize, admin.WithLogger(slog.New(slog.DiscardHandler)))
	register := func(s grpc.ServiceRegistrar) { adminv1.RegisterAdminServiceServer(s, svc) }
	if !m.mtls {
		adm := testserver.StartLoopback(tb, register)
		env.Setenv("ADMIN_ADDR", adm.Addr())
		return []string{"--addr", adm.Addr(), "--insecure"}, nil
	}
	tc, err := writeCerts(env.WorkDir)
	if err != nil {
		return nil, err
	}
	adm := testserver.StartLoopback(tb, register, grpc.Creds(credentials.NewTLS(tc)))
	env.Setenv("ADMIN_ADDR", adm.Addr())
	return []string{
		"--addr", adm.Addr(), "--tls-server-name", adminServerName, "--tls-ca", filepath.Join(env.WorkDir, "ca.pem"),
		"--tls-cert", filepath.Join(env.WorkDir, "client.pem"), "--tls-key", filepath.Join(env.WorkDir, "client-key.pem"),
	}, nil
}

// openStore returns a fresh store of m's kind, closed when tb ends, and
// the flags that reach it directly; shared is the mode's Cluster or
// Sentinel.
func openStore(tb testing.TB, m mode, shared any) (store.Store, []string) {
	tb.Helper()
	prefix := "ctl" + strings.ToLower(rand.Text()[:10]) + ":"
	switch {
	case m.topology == "cluster":
		c := shared.(*redistest.Cluster)
		rdb := redis.NewClusterClient(c.Options())
		tb.Cleanup(func() { _ = rdb.Close() })
		addrs := c.Addrs()
		u := "redis://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
		return redisstore.New(rdb, redisstore.WithPrefix(prefix)), []string{"--redis-cluster", u, "--redis-prefix", prefix}
	case m.topology == "sentinel":
		s := shared.(*redistest.Sentinel)
		rdb := redis.NewFailoverClient(s.Options())
		tb.Cleanup(func() { _ = rdb.Close() })
		u := "redis://" + s.Addr() + "?master_name=" + redistest.SentinelMaster
		return redisstore.New(rdb, redisstore.WithPrefix(prefix)), []string{"--redis-sentinel", u, "--redis-prefix", prefix}
	case m.store == "redis":
		rs := redistest.StartServer(tb)
		return redisstore.New(rs.Client()), []string{"--redis", "redis://" + rs.Addr()}
	case m.store == "postgres":
		table := "ctl_" + strings.ToLower(rand.Text()[:10])
		st := postgresstore.New(pgtest.Pool(tb, 4), postgresstore.WithTable(table))
		tb.Cleanup(func() { _ = st.Close() })
		if err := st.Migrate(context.Background()); err != nil {
			tb.Fatal(err)
		}
		return st, []string{"--postgres", pgtest.URL(tb), "--table", table}
	case m.store == "mysql":
		table := "ctl_" + strings.ToLower(rand.Text()[:10])
		st := mysqlstore.New(mysqltest.DB(tb, 4), mysqlstore.WithTable(table))
		tb.Cleanup(func() { _ = st.Close() })
		if err := st.Migrate(context.Background()); err != nil {
			tb.Fatal(err)
		}
		return st, []string{"--mysql", mysqltest.DSN(tb), "--table", table}
	case m.store == "sqlite":
		// The script's own file, with the store's default table: no
		// --table.
		file := filepath.Join(tb.TempDir(), "idempotency.db")
		st := sqlitestore.New(sqliteDB(tb, file))
		tb.Cleanup(func() { _ = st.Close() })
		if err := st.Migrate(context.Background()); err != nil {
			tb.Fatal(err)
		}
		return st, []string{"--sqlite", file}
	}
	return testkit.NewMemoryStore(tb), nil
}

// sqliteDB opens the SQLite database file, closed when tb ends.
func sqliteDB(tb testing.TB, file string) *sql.DB {
	tb.Helper()
	db, err := sqlitestore.Open(file)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// tenant is the server's scope function: the caller's x-tenant metadata.
func tenant(ctx context.Context) (string, error) {
	if v := metadata.ValueFromIncomingContext(ctx, "x-tenant"); len(v) == 1 {
		return v[0], nil
	}
	return "", nil
}

// Operators, as the admin service's authorization function knows them
// from the x-operator metadata (ctl -as).
const (
	alice  = "alice"  // may call everything
	reader = "reader" // may call everything but PurgeKey and ResolveKey
)

// authorize lets alice call everything and reader everything but
// PurgeKey and ResolveKey, answers a caller without x-operator UNAUTHENTICATED, and
// refuses anyone else (PERMISSION_DENIED).
func authorize(ctx context.Context, method string) (string, error) {
	who := metadata.ValueFromIncomingContext(ctx, "x-operator")
	switch {
	case len(who) != 1:
		return "", status.Error(codes.Unauthenticated, "no operator credentials")
	case who[0] == alice:
		return alice, nil
	case who[0] == reader && method != adminv1.AdminService_PurgeKey_FullMethodName && method != adminv1.AdminService_ResolveKey_FullMethodName:
		return reader, nil
	}
	return "", errors.New("not an operator")
}
