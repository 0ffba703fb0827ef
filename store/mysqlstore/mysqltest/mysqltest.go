// Package mysqltest gives tests a database of their own on a real MySQL or
// MariaDB server.
//
// The server comes from the environment variable [URLEnv]
// (IDEMPOTENCY_MYSQL_URL), a go-sql-driver/mysql DSN, or [DefaultURL] when
// it is unset: a local server on 127.0.0.1:3306 where root may log in over
// TCP without a password. The user must be allowed to create databases.
//
// The first test of a package that asks for a database ([DB], [DSN])
// creates one, named idempotency_test_<package>_<random>, and every later
// test of the package shares it: table names of their own keep tests
// apart. [Exit], called from TestMain, drops it when the package's tests
// are over:
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(m, goleak.Cleanup(mysqltest.Exit))
//	}
//
// Without a reachable server the test is skipped with a message that says
// how to get one, or fails when [RequireEnv] (IDEMPOTENCY_REQUIRE_MYSQL)
// is "1", as in CI.
//
// It is published with mysqlstore for the tests of this repository's modules,
// which may require only published modules, and of services that use mysqlstore;
// its API follows the module's version.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Environment variables and the default server.
const (
	// URLEnv names the server tests create their databases on, as a
	// go-sql-driver/mysql DSN without a database name.
	URLEnv = "IDEMPOTENCY_MYSQL_URL"
	// RequireEnv turns a missing server into a failure instead of a skip
	// when it is "1". CI sets it.
	RequireEnv = "IDEMPOTENCY_REQUIRE_MYSQL"
	// DefaultURL is the server used when URLEnv is unset.
	DefaultURL = "root@tcp(127.0.0.1:3306)/"
)

// connectTimeout bounds the first connection to the server.
const connectTimeout = 5 * time.Second

var pkg struct {
	once sync.Once
	name string // the database created for this package, once created
	cfg  *mysql.Config
	err  error

	mu    sync.Mutex
	extra []string // databases of ExtraDatabase, dropped with the package's
}

// serverDSN returns the DSN of the server: [URLEnv], or [DefaultURL].
func serverDSN() string {
	if u := os.Getenv(URLEnv); u != "" {
		return u
	}
	return DefaultURL
}

// serverConfig parses the server's DSN.
func serverConfig() (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(serverDSN())
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", URLEnv, err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = connectTimeout
	}
	return cfg, nil
}

// DSN returns a DSN for the package's database, creating it on first use:
// the server's DSN with the database name set. It skips or fails tb when
// no server answers (see the package documentation).
func DSN(tb testing.TB) string {
	tb.Helper()
	d, err := DatabaseDSN()
	if err != nil {
		unavailable(tb, err)
	}
	return d
}

// DatabaseDSN is [DSN] for code without a testing.TB, such as TestMain or
// an Example: it returns the error instead of skipping.
func DatabaseDSN() (string, error) {
	pkg.once.Do(create)
	if pkg.err != nil {
		return "", pkg.err
	}
	return pkg.cfg.FormatDSN(), nil
}

// Config returns a configuration for the package's database, for callers
// that change it before connecting ([DBFrom]).
func Config(tb testing.TB) *mysql.Config {
	tb.Helper()
	cfg, err := mysql.ParseDSN(DSN(tb))
	if err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	return cfg
}

// DB returns a pool of at most maxConns connections (at least 1) on the
// package's database, closed when tb ends.
func DB(tb testing.TB, maxConns int) *sql.DB {
	tb.Helper()
	return DBFrom(tb, Config(tb), maxConns)
}

// DBFrom opens a pool of at most maxConns connections (at least 1) with
// cfg, checks that it connects, and closes it when tb ends. Every
// connection is kept open as long as the pool lives (no idle limit), so
// that a count of round trips is not disturbed by reconnections.
func DBFrom(tb testing.TB, cfg *mysql.Config, maxConns int) *sql.DB {
	tb.Helper()
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	db := sql.OpenDB(conn)
	n := max(maxConns, 1)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	tb.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		tb.Fatalf("mysqltest: connecting to %s: %v", cfg.Addr, err)
	}
	return db
}

// NewDatabase creates a database of tb's own, beside the package's, and
// drops it when tb ends. It returns a DSN for it, for tests of what
// differs between databases; the pools on it must be closed before tb's
// cleanup drops it, which pools made after this call by [DBFrom] are.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	DSN(tb) // the server is there, or tb is skipped or failed
	name := pkg.name + "_" + strings.ToLower(rand.Text()[:6])
	if err := onServer(func(ctx context.Context, db *sql.DB) error {
		_, err := db.ExecContext(ctx, "CREATE DATABASE "+Quote(name))
		return err
	}); err != nil {
		tb.Fatalf("mysqltest: creating database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if err := onServer(func(ctx context.Context, db *sql.DB) error {
			_, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+Quote(name))
			return err
		}); err != nil {
			tb.Errorf("mysqltest: dropping database %s: %v", name, err)
		}
	})
	cfg := pkg.cfg.Clone()
	cfg.DBName = name
	return cfg.FormatDSN()
}

// ExtraDatabase creates a database beside the package's, dropped with it
// by [Exit] or [Drop], and returns a DSN for it: for an Example, which has
// no testing.TB and may run more than once in a process (-count).
func ExtraDatabase() (string, error) {
	if _, err := DatabaseDSN(); err != nil {
		return "", err
	}
	name := pkg.name + "_" + strings.ToLower(rand.Text()[:6])
	if err := onServer(func(ctx context.Context, db *sql.DB) error {
		_, err := db.ExecContext(ctx, "CREATE DATABASE "+Quote(name))
		return err
	}); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	pkg.mu.Lock()
	pkg.extra = append(pkg.extra, name)
	pkg.mu.Unlock()
	cfg := pkg.cfg.Clone()
	cfg.DBName = name
	return cfg.FormatDSN(), nil
}

// Quote returns name as a MySQL identifier in backquotes.
func Quote(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// onServer runs f on a connection to the server, without a database.
func onServer(f func(ctx context.Context, db *sql.DB) error) error {
	cfg, err := serverConfig()
	if err != nil {
		return err
	}
	cfg.DBName = ""
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return f(ctx, db)
}

func create() {
	cfg, err := serverConfig()
	if err != nil {
		pkg.err = err
		return
	}
	name := "idempotency_test_" + packageName() + "_" + strings.ToLower(rand.Text()[:10])
	err = onServer(func(ctx context.Context, db *sql.DB) error {
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		if err := db.PingContext(cctx); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, "CREATE DATABASE "+Quote(name)); err != nil {
			return fmt.Errorf("creating database %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		pkg.err = err
		return
	}
	pkg.name = name
	cfg.DBName = name
	pkg.cfg = cfg
}

// Exit drops the package's database, if a test created one, and exits with
// code. It is meant for TestMain, directly or as goleak.Cleanup. A database
// that cannot be dropped is reported on stderr.
func Exit(code int) {
	if err := Drop(); err != nil {
		fmt.Fprintf(os.Stderr, "mysqltest: %v\n", err)
	}
	os.Exit(code)
}

// Drop drops the package's database, if a test created one, for a TestMain
// that exits through another helper's Exit (pgtest's).
func Drop() error {
	if pkg.name == "" {
		return nil
	}
	pkg.mu.Lock()
	names := append(pkg.extra, pkg.name) //nolint:gocritic // pkg.extra is dropped on the next line: names takes its array
	pkg.extra = nil
	pkg.mu.Unlock()
	for _, name := range names {
		if err := onServer(func(ctx context.Context, db *sql.DB) error {
			_, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+Quote(name))
			return err
		}); err != nil {
			return fmt.Errorf("dropping database %s: %w", name, err)
		}
	}
	pkg.name = ""
	return nil
}

// unavailable skips tb, or fails it under RequireEnv=1.
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	msg := fmt.Sprintf("mysqltest: no MySQL or MariaDB server to create a test database on (%v). "+
		"Set %s to a server where you may create databases (a go-sql-driver/mysql DSN, default %s); for example: "+
		"apt-get install mariadb-server, start it, and let root (or another user, named in the DSN with its password) "+
		"log in over TCP from 127.0.0.1. .ci/run does all of that", err, URLEnv, DefaultURL)
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
