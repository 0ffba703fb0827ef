// Package pgtest gives tests a database of their own on a real PostgreSQL
// server.
//
// The server comes from the environment variable [URLEnv]
// (IDEMPOTENCY_POSTGRES_URL), or [DefaultURL] when it is unset: a local
// server on 127.0.0.1:5432 where the user postgres may log in without a
// password. The user must be allowed to create databases.
//
// The first test of a package that asks for a database ([Pool], [URL])
// creates one, named idempotency_test_<package>_<random>, and every later
// test of the package shares it: keys, table names or schemas of their own
// keep tests apart. [Exit], called from TestMain, drops it when the package's
// tests are over:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.Exit))
//	}
//
// Without a reachable server the test is skipped with a message that says
// how to get one, or fails when [RequireEnv] (IDEMPOTENCY_REQUIRE_POSTGRES)
// is "1", as in CI.
//
// It is published with postgresstore for the tests of this repository's modules,
// which may require only published modules, and of services that use postgresstore;
// its API follows the module's version.
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Environment variables and the default server.
const (
	// URLEnv names the server tests create their databases on.
	URLEnv = "IDEMPOTENCY_POSTGRES_URL"
	// RequireEnv turns a missing server into a failure instead of a skip
	// when it is "1". CI sets it.
	RequireEnv = "IDEMPOTENCY_REQUIRE_POSTGRES"
	// DefaultURL is the server used when URLEnv is unset.
	DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
)

// connectTimeout bounds the first connection to the server.
const connectTimeout = 5 * time.Second

var pkg struct {
	once sync.Once
	name string // the database created for this package, once created
	cfg  *pgx.ConnConfig
	err  error
}

// serverURL returns the URL of the server: [URLEnv], or [DefaultURL].
func serverURL() string {
	if u := os.Getenv(URLEnv); u != "" {
		return u
	}
	return DefaultURL
}

// URL returns a connection string for the package's database, creating it
// on first use: the server's URL with the database name replaced. It skips
// or fails tb when no server answers (see the package documentation).
func URL(tb testing.TB) string {
	tb.Helper()
	u, err := DatabaseURL()
	if err != nil {
		unavailable(tb, err)
	}
	return u
}

// DatabaseURL is [URL] for code without a testing.TB, such as TestMain or
// an Example: it returns the error instead of skipping.
func DatabaseURL() (string, error) {
	pkg.once.Do(create)
	if pkg.err != nil {
		return "", pkg.err
	}
	return urlOf(pkg.cfg.Database), nil
}

// urlOf returns the server's URL with the database name replaced by name.
func urlOf(name string) string {
	u, err := url.Parse(serverURL())
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// A keyword/value string: a later dbname wins.
		return serverURL() + " dbname=" + name
	}
	u.Path = "/" + name
	return u.String()
}

// NewDatabase creates a database of tb's own, beside the package's, runs
// each of settings on it as ALTER DATABASE name SET setting (for example
// "default_transaction_isolation = 'serializable'", which applies to the
// connections opened after it), and drops it when tb ends. It returns a
// connection string for it, for tests of what differs between databases;
// the pools on it must be closed before tb's cleanup drops it, which
// pools made after this call by [PoolFrom] are.
func NewDatabase(tb testing.TB, settings ...string) string {
	tb.Helper()
	URL(tb) // the server is there, or tb is skipped or failed
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(serverURL())
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	raw := pkg.cfg.Database + "_" + strings.ToLower(rand.Text()[:6])
	name := pgx.Identifier{raw}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			defer func() { _ = conn.Close(context.Background()) }()
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		}
		if err != nil {
			tb.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	for _, set := range settings {
		if _, err := conn.Exec(ctx, "ALTER DATABASE "+name+" SET "+set); err != nil {
			tb.Fatalf("pgtest: ALTER DATABASE %s SET %s: %v", name, set, err)
		}
	}
	return urlOf(raw)
}

// Config returns a pool configuration for the package's database with at
// most maxConns connections (at least 1), for callers that change it
// before connecting.
func Config(tb testing.TB, maxConns int32) *pgxpool.Config {
	tb.Helper()
	pc, err := pgxpool.ParseConfig(URL(tb))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	pc.MaxConns = max(maxConns, 1)
	return pc
}

// Pool returns a pool of at most maxConns connections on the package's
// database, closed when tb ends.
func Pool(tb testing.TB, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	return PoolFrom(tb, Config(tb, maxConns))
}

// PoolFrom connects a pool with cfg and closes it when tb ends.
func PoolFrom(tb testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	tb.Helper()
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(p.Close)
	return p
}

func create() {
	cfg, err := pgx.ParseConfig(serverURL())
	if err != nil {
		pkg.err = fmt.Errorf("parsing %s: %w", URLEnv, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		pkg.err = err
		return
	}
	defer func() { _ = conn.Close(context.Background()) }()
	name := "idempotency_test_" + packageName() + "_" + strings.ToLower(rand.Text()[:10])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		pkg.err = fmt.Errorf("creating database %s: %w", name, err)
		return
	}
	pkg.name = name
	cfg.Database = name
	pkg.cfg = cfg
}

// Exit drops the package's database, if a test created one, and exits with
// code. It is meant for TestMain, directly or as goleak.Cleanup. A database
// that cannot be dropped is reported on stderr.
func Exit(code int) {
	if err := Drop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
	}
	os.Exit(code)
}

// Drop drops the package's database, if a test created one, closing any
// connection still open to it. Exit calls it; a TestMain that must return
// its code rather than exit (testscript.Main, which removes its directory
// once the tests return) calls it itself.
func Drop() error {
	if pkg.name == "" {
		return nil
	}
	cfg, err := pgx.ParseConfig(serverURL())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("dropping database %s: %w", pkg.name, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{pkg.name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", pkg.name, err)
	}
	pkg.name = ""
	return nil
}

// unavailable skips tb, or fails it under RequireEnv=1.
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	msg := fmt.Sprintf("pgtest: no PostgreSQL server to create a test database on (%v). "+
		"Set %s to a server where you may create databases (default %s); for example: "+
		"apt-get install postgresql, start it with pg_ctlcluster, and allow local TCP logins "+
		"(trust, or a password in the URL) in pg_hba.conf. .ci/run does all of that", err, URLEnv, DefaultURL)
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf("%s (%s=1, so this fails instead of skipping)", msg, RequireEnv)
	}
	tb.Skip(msg)
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// packageName is the test binary's package, for the database name: "x.test"
// becomes "x".
func packageName() string {
	n := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	n = unsafeChars.ReplaceAllString(strings.ToLower(n), "_")
	if len(n) > 20 {
		n = n[:20]
	}
	return strings.Trim(n, "_")
}
