// Command backends says, before the test suite runs, which backends its
// tests will use and which they will skip: `go test` hides the output of
// packages that pass, so a skipped Redis, PostgreSQL or RabbitMQ test is
// otherwise invisible. It prints one line per backend:
//
//	redis: found redis-server (version 7.0.15), tests run
//	postgres: not reachable at 127.0.0.1:5432 (connection refused), tests skip; ...
//	mysql: found MariaDB 10.11.19-MariaDB-0+deb12u1 at 127.0.0.1:3306, user root without a password, tests run
//	rabbitmq: found RabbitMQ 3.12.1 at 127.0.0.1:5672, tests run
//
// It exits with status 1 when a backend is missing although
// IDEMPOTENCY_REQUIRE_REDIS=1, IDEMPOTENCY_REQUIRE_POSTGRES=1,
// IDEMPOTENCY_REQUIRE_MYSQL=1 or IDEMPOTENCY_REQUIRE_RABBITMQ=1 asks its
// tests to fail instead of skipping, so that CI stops before running the suite. Run it from the
// repository root (make test does):
//
//	go run ./internal/tools/backends && go test -race -shuffle=on -count=1 ./...
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// Environment variables read by the tests, and by this command.
const (
	requireRedisEnv    = "IDEMPOTENCY_REQUIRE_REDIS"
	requirePostgresEnv = "IDEMPOTENCY_REQUIRE_POSTGRES"
	postgresURLEnv     = "IDEMPOTENCY_POSTGRES_URL"
	// defaultPostgresURL is the database the PostgreSQL tests use when
	// postgresURLEnv is not set.
	defaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	// postgresPackage holds the PostgreSQL tests.
	postgresPackage = "store/postgresstore"

	requireMySQLEnv = "IDEMPOTENCY_REQUIRE_MYSQL"
	mysqlURLEnv     = "IDEMPOTENCY_MYSQL_URL"
	// defaultMySQLURL is the server the MySQL tests use when mysqlURLEnv
	// is not set (a go-sql-driver/mysql DSN).
	defaultMySQLURL = "root@tcp(127.0.0.1:3306)/"
	// mysqlPackage holds the MySQL tests.
	mysqlPackage = "store/mysqlstore"

	requireRabbitEnv = "IDEMPOTENCY_REQUIRE_RABBITMQ"
	rabbitURLEnv     = "IDEMPOTENCY_RABBITMQ_URL"
	// defaultRabbitURL is the server the RabbitMQ tests use when
	// rabbitURLEnv is not set: a local RabbitMQ's default guest user.
	defaultRabbitURL = "amqp://guest:guest@127.0.0.1:5672/"
	// rabbitPackage holds the RabbitMQ tests.
	rabbitPackage = "watermillidempotency"
)

func main() {
	missing := report(os.Stdout, probes{
		redis:    probeRedis,
		postgres: probePostgres,
		hasPostgresTests: func() bool {
			_, err := os.Stat(postgresPackage)
			return err == nil
		},
		mysql: probeMySQL,
		hasMySQLTests: func() bool {
			_, err := os.Stat(mysqlPackage)
			return err == nil
		},
		rabbitmq: probeRabbitMQ,
		hasRabbitTests: func() bool {
			_, err := os.Stat(rabbitPackage)
			return err == nil
		},
		getenv: os.Getenv,
	})
	if missing {
		os.Exit(1)
	}
}

// probes are what report checks, replaceable in tests.
type probes struct {
	redis            func() (string, error)
	postgres         func(url string) (string, error)
	hasPostgresTests func() bool
	mysql            func(dsn string) (string, error)
	hasMySQLTests    func() bool
	rabbitmq         func(url string) (string, error)
	hasRabbitTests   func() bool
	getenv           func(string) string
}

// report prints one line per backend and returns whether a backend that
// the environment requires is missing.
func report(out io.Writer, p probes) (missing bool) {
	if v, err := p.redis(); err == nil {
		fmt.Fprintf(out, "redis: found redis-server (%s), tests run\n", v)
	} else {
		missing = say(out, p.getenv(requireRedisEnv) == "1", "redis", err.Error(),
			"install redis-server and redis-tools (apt-get install redis-server redis-tools)", requireRedisEnv)
	}
	missing = reportPostgres(out, p) || missing
	missing = reportMySQL(out, p) || missing
	return reportRabbitMQ(out, p) || missing
}

// reportPostgres prints the PostgreSQL line and returns whether a required
// server is missing.
func reportPostgres(out io.Writer, p probes) bool {
	if !p.hasPostgresTests() {
		fmt.Fprintf(out, "postgres: no %s in this tree, no tests to run\n", postgresPackage)
		return false
	}
	url := p.getenv(postgresURLEnv)
	if url == "" {
		url = defaultPostgresURL
	}
	v, err := p.postgres(url)
	if err != nil {
		return say(out, p.getenv(requirePostgresEnv) == "1", "postgres", err.Error(),
			"start a PostgreSQL that trusts user postgres on 127.0.0.1:5432 (apt-get install postgresql), or set "+postgresURLEnv,
			requirePostgresEnv)
	}
	fmt.Fprintf(out, "postgres: found %s, tests run\n", v)
	return false
}

// reportMySQL prints the MySQL line and returns whether a required server
// is missing.
func reportMySQL(out io.Writer, p probes) bool {
	if !p.hasMySQLTests() {
		fmt.Fprintf(out, "mysql: no %s in this tree, no tests to run\n", mysqlPackage)
		return false
	}
	dsn := p.getenv(mysqlURLEnv)
	if dsn == "" {
		dsn = defaultMySQLURL
	}
	v, err := p.mysql(dsn)
	if err != nil {
		return say(out, p.getenv(requireMySQLEnv) == "1", "mysql", err.Error(),
			"start a MariaDB or MySQL where root logs in over TCP from 127.0.0.1 without a password (apt-get install mariadb-server; .ci/run does it), or set "+mysqlURLEnv,
			requireMySQLEnv)
	}
	fmt.Fprintf(out, "mysql: found %s, tests run\n", v)
	return false
}

// reportRabbitMQ prints the RabbitMQ line and returns whether a required
// server is missing.
func reportRabbitMQ(out io.Writer, p probes) bool {
	if !p.hasRabbitTests() {
		fmt.Fprintf(out, "rabbitmq: no %s in this tree, no tests to run\n", rabbitPackage)
		return false
	}
	url := p.getenv(rabbitURLEnv)
	if url == "" {
		url = defaultRabbitURL
	}
	v, err := p.rabbitmq(url)
	if err != nil {
		return say(out, p.getenv(requireRabbitEnv) == "1", "rabbitmq", err.Error(),
			"start a RabbitMQ with its guest user on 127.0.0.1:5672 (apt-get install rabbitmq-server; rabbitmq-server -detached), or set "+rabbitURLEnv,
			requireRabbitEnv)
	}
	fmt.Fprintf(out, "rabbitmq: found %s, tests run\n", v)
	return false
}

// say prints the line of a missing backend and returns required.
func say(out io.Writer, required bool, name, why, install, env string) bool {
	if required {
		fmt.Fprintf(out, "%s: %s, and %s=1: its tests would fail; %s\n", name, why, env, install)
		return true
	}
	fmt.Fprintf(out, "%s: %s, tests skip; %s, or set %s=1 to fail instead\n", name, why, install, env)
	return false
}

// probeRedis finds redis-server and redis-cli on PATH, as the tests do,
// and returns the server's version.
func probeRedis() (string, error) {
	server, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server not found")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return "", fmt.Errorf("redis-cli not found")
	}
	v, err := exec.Command(server, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("redis-server --version: %v", err)
	}
	if m := versionField.FindSubmatch(v); m != nil {
		return "version " + string(m[1]), nil
	}
	return strings.TrimSpace(string(v)), nil
}

// versionField is the version in redis-server --version's output.
var versionField = regexp.MustCompile(`\bv=(\S+)`)
