package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	adminv1 "github.com/grpc-idempotency/idempotency/gen/idempotency/admin/v1"
)

// connFlags say where the admin service or the store is.
type connFlags struct {
	// The admin service.
	addr          string
	insecure      bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsServerName string
	headers       []string // key=value

	// A store reached directly.
	redis         string
	redisCluster  string
	redisSentinel string
	redisPrefix   string
	postgres      string
	mysql         string
	sqlite        string
	table         string
	descriptorSet string
}

// Flags of each way in, for the checks of validate.
var (
	targetFlags  = []string{"addr", "redis", "redis-cluster", "redis-sentinel", "postgres", "mysql", "sqlite"}
	serviceFlags = []string{"insecure", "tls-ca", "tls-cert", "tls-key", "tls-server-name", "header"}
	directFlags  = []string{"descriptor-set"}
)

func (f *connFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.addr, "addr", "", "host:port of the admin service (idempotency.admin.v1.AdminService)")
	fs.BoolVar(&f.insecure, "insecure", false, "reach --addr without TLS: for a loopback address or a port-forward only")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CAs that sign the admin service's certificate (default: the system's)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM file of the operator's client certificate, for mTLS (with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM file of the client certificate's private key")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "the name the admin service's certificate must carry (default: the host of --addr)")
	fs.StringArrayVarP(&f.headers, "header", "H", nil, "key=value metadata sent with every call, for the server's authorization function (repeatable)")
	fs.StringVar(&f.redis, "redis", "", "reach a Redis store directly: redis://[user:password@]host:port[/db] (rediss:// for TLS, unix:// for a socket)")
	fs.StringVar(&f.redisCluster, "redis-cluster", "", "reach a Redis Cluster store directly: redis://host:port?addr=host2:port2&addr=…")
	fs.StringVar(&f.redisSentinel, "redis-sentinel", "", "reach a Redis store through Sentinel: redis://sentinel:port?master_name=NAME&addr=…")
	fs.StringVar(&f.redisPrefix, "redis-prefix", "idempotency:", "the store's key prefix (redisstore.WithPrefix)")
	fs.StringVar(&f.postgres, "postgres", "", "reach a PostgreSQL store directly: postgres://user@host:port/db")
	fs.StringVar(&f.mysql, "mysql", "", "reach a MySQL or MariaDB store directly: a go-sql-driver/mysql DSN, user:password@tcp(host:3306)/db")
	fs.StringVar(&f.sqlite, "sqlite", "", "reach a SQLite store directly: the path of its database file, on this host")
	fs.StringVar(&f.table, "table", "idempotency_records", "the store's table: name, or schema.name (postgresstore.WithTable) or database.name (mysqlstore.WithTable), or name with --sqlite (sqlitestore.WithTable, in the file's main database)")
	fs.StringVar(&f.descriptorSet, "descriptor-set", "", "a FileDescriptorSet of the service's protos, to decode stored messages and read method options (direct access)")
}

// validate checks that the flags name one way in, and only flags of that
// way.
func (f *connFlags) validate(fs *pflag.FlagSet) error {
	var targets []string
	for _, name := range targetFlags {
		if fs.Changed(name) {
			targets = append(targets, "--"+name)
		}
	}
	switch len(targets) {
	case 0:
		return usageError("name the admin service with --addr, or a store with --redis, --redis-cluster, --redis-sentinel, --postgres, --mysql or --sqlite")
	case 1:
	default:
		return usageError("%s: name one of them", strings.Join(targets, " and "))
	}
	for _, name := range serviceFlags {
		if fs.Changed(name) && f.addr == "" {
			return usageError("--%s is a flag of --addr (the admin service), not of a store reached directly", name)
		}
	}
	for _, name := range directFlags {
		if fs.Changed(name) && f.addr != "" {
			return usageError("--%s is a flag of a store reached directly: the admin service uses the server's own descriptors", name)
		}
	}
	if fs.Changed("redis-prefix") && f.redis == "" && f.redisCluster == "" && f.redisSentinel == "" {
		return usageError("--redis-prefix is a flag of --redis, --redis-cluster and --redis-sentinel")
	}
	if fs.Changed("table") && f.postgres == "" && f.mysql == "" && f.sqlite == "" {
		return usageError("--table is a flag of --postgres, --mysql and --sqlite")
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usageError("--tls-cert and --tls-key go together")
	}
	if f.insecure && (f.tlsCA != "" || f.tlsCert != "" || f.tlsServerName != "") {
		return usageError("--insecure turns TLS off: it takes no --tls-* flag")
	}
	for _, h := range f.headers {
		if k, _, ok := strings.Cut(h, "="); !ok || k == "" {
			return usageError("--header %q: want key=value", h)
		}
	}
	return nil
}

// backend is the admin service, over gRPC or in process: the methods of
// adminv1.AdminServiceServer, which [admin.Service] implements.
type backend interface {
	GetKey(context.Context, *adminv1.GetKeyRequest) (*adminv1.GetKeyResponse, error)
	ListKeys(context.Context, *adminv1.ListKeysRequest) (*adminv1.ListKeysResponse, error)
	PurgeKey(context.Context, *adminv1.PurgeKeyRequest) (*adminv1.PurgeKeyResponse, error)
	GetStats(context.Context, *adminv1.GetStatsRequest) (*adminv1.GetStatsResponse, error)
	ResolveKey(context.Context, *adminv1.ResolveKeyRequest) (*adminv1.ResolveKeyResponse, error)
}

// conn is an open way in.
type conn struct {
	backend
	// where names it in messages, without a URL's credentials.
	where string
	// direct is true for a store reached directly.
	direct bool
	// place is where in the store reached directly the flags look: its
	// prefix or table.
	place *place
	close func()
}

// open opens the way in the flags name.
func (c *cli) open(ctx context.Context) (*conn, error) {
	if c.conn.addr != "" {
		return c.conn.dial()
	}
	return c.conn.openDirect(ctx, c.stderr)
}

// dial connects to the admin service at --addr.
func (f *connFlags) dial() (*conn, error) {
	creds := insecure.NewCredentials()
	if !f.insecure {
		tc, err := f.tlsConfig()
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	cc, err := grpc.NewClient(f.addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent("idempotencyctl"),
		// A stored outcome may be larger than gRPC's default 4 MB.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)),
	)
	if err != nil {
		return nil, usageError("--addr %q: %v", f.addr, err)
	}
	md := metadata.MD{}
	for _, h := range f.headers {
		k, v, _ := strings.Cut(h, "=")
		md.Append(strings.ToLower(k), v)
	}
	return &conn{
		backend: remote{client: adminv1.NewAdminServiceClient(cc), md: md},
		where:   "the admin service at " + f.addr,
		close:   func() { _ = cc.Close() },
	}, nil
}

// tlsConfig returns the TLS configuration the flags describe.
func (f *connFlags) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.tlsServerName}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, failure("--tls-ca: %v", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, failure("--tls-ca %s: no PEM certificate in it", f.tlsCA)
		}
	}
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, failure("--tls-cert, --tls-key: %v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// remote is the admin service over gRPC, every call carrying the
// --header metadata.
type remote struct {
	client adminv1.AdminServiceClient
	md     metadata.MD
}

func (r remote) ctx(ctx context.Context) context.Context {
	return metadata.NewOutgoingContext(ctx, r.md)
}

func (r remote) GetKey(ctx context.Context, req *adminv1.GetKeyRequest) (*adminv1.GetKeyResponse, error) {
	return r.client.GetKey(r.ctx(ctx), req)
}

func (r remote) ListKeys(ctx context.Context, req *adminv1.ListKeysRequest) (*adminv1.ListKeysResponse, error) {
	return r.client.ListKeys(r.ctx(ctx), req)
}

func (r remote) PurgeKey(ctx context.Context, req *adminv1.PurgeKeyRequest) (*adminv1.PurgeKeyResponse, error) {
	return r.client.PurgeKey(r.ctx(ctx), req)
}

func (r remote) GetStats(ctx context.Context, req *adminv1.GetStatsRequest) (*adminv1.GetStatsResponse, error) {
	return r.client.GetStats(r.ctx(ctx), req)
}

func (r remote) ResolveKey(ctx context.Context, req *adminv1.ResolveKeyRequest) (*adminv1.ResolveKeyResponse, error) {
	return r.client.ResolveKey(r.ctx(ctx), req)
}

// with opens the way in, runs f with it, and closes it.
func (c *cli) with(ctx context.Context, f func(*conn) error) error {
	cn, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer cn.close()
	return f(cn)
}

// call returns ctx bounded by --timeout, for one call.
func (c *cli) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}
