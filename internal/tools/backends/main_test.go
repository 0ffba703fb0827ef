package main

import (
	"errors"
	"net"
	neturl "net/url"
	"os"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	t.Parallel()
	found := func() (string, error) { return "version 7.0.15", nil }
	absent := func() (string, error) { return "", errors.New("redis-server not found") }
	pgFound := func(string) (string, error) { return "PostgreSQL at 127.0.0.1:5432", nil }
	pgAbsent := func(string) (string, error) { return "", errors.New("not reachable at 127.0.0.1:5432") }
	myFound := func(string) (string, error) { return "MariaDB 10.11.19 at 127.0.0.1:3306", nil }
	myAbsent := func(string) (string, error) { return "", errors.New("not reachable at 127.0.0.1:3306") }
	rmqFound := func(string) (string, error) { return "RabbitMQ 3.12.1 at 127.0.0.1:5672", nil }
	rmqAbsent := func(string) (string, error) { return "", errors.New("not reachable at 127.0.0.1:5672") }
	cases := map[string]struct {
		redis       func() (string, error)
		postgres    func(string) (string, error)
		mysql       func(string) (string, error)
		rabbitmq    func(string) (string, error)
		pgTests     bool
		myTests     bool
		rmqTests    bool
		env         map[string]string
		wantMissing bool
		want        []string
	}{
		"all found": {found, pgFound, myFound, rmqFound, true, true, true, nil, false,
			[]string{"redis: found redis-server (version 7.0.15), tests run", "postgres: found PostgreSQL at 127.0.0.1:5432, tests run",
				"mysql: found MariaDB 10.11.19 at 127.0.0.1:3306, tests run", "rabbitmq: found RabbitMQ 3.12.1 at 127.0.0.1:5672, tests run"}},
		"all absent, skipped": {absent, pgAbsent, myAbsent, rmqAbsent, true, true, true, nil, false,
			[]string{"redis: redis-server not found, tests skip; install", "IDEMPOTENCY_REQUIRE_REDIS=1 to fail instead",
				"postgres: not reachable at 127.0.0.1:5432, tests skip;", "IDEMPOTENCY_REQUIRE_POSTGRES=1 to fail instead",
				"mysql: not reachable at 127.0.0.1:3306, tests skip;", "IDEMPOTENCY_REQUIRE_MYSQL=1 to fail instead",
				"rabbitmq: not reachable at 127.0.0.1:5672, tests skip; start a RabbitMQ", "IDEMPOTENCY_REQUIRE_RABBITMQ=1 to fail instead"}},
		"redis required": {absent, pgFound, myFound, rmqFound, true, true, true, map[string]string{requireRedisEnv: "1"}, true,
			[]string{"redis: redis-server not found, and IDEMPOTENCY_REQUIRE_REDIS=1: its tests would fail"}},
		"postgres required": {found, pgAbsent, myFound, rmqFound, true, true, true, map[string]string{requirePostgresEnv: "1"}, true,
			[]string{"and IDEMPOTENCY_REQUIRE_POSTGRES=1: its tests would fail"}},
		"mysql required": {found, pgFound, myAbsent, rmqFound, true, true, true, map[string]string{requireMySQLEnv: "1"}, true,
			[]string{"and IDEMPOTENCY_REQUIRE_MYSQL=1: its tests would fail"}},
		"rabbitmq required": {found, pgFound, myFound, rmqAbsent, true, true, true, map[string]string{requireRabbitEnv: "1"}, true,
			[]string{"rabbitmq: not reachable at 127.0.0.1:5672, and IDEMPOTENCY_REQUIRE_RABBITMQ=1: its tests would fail"}},
		"no postgres tests": {found, pgAbsent, myFound, rmqFound, false, true, true, map[string]string{requirePostgresEnv: "1"}, false,
			[]string{"postgres: no store/postgresstore in this tree, no tests to run"}},
		"no mysql tests": {found, pgFound, myAbsent, rmqFound, true, false, true, map[string]string{requireMySQLEnv: "1"}, false,
			[]string{"mysql: no store/mysqlstore in this tree, no tests to run"}},
		"no rabbitmq tests": {found, pgFound, myFound, rmqAbsent, true, true, false, map[string]string{requireRabbitEnv: "1"}, false,
			[]string{"rabbitmq: no watermillidempotency in this tree, no tests to run"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			var gotURL, gotMySQLURL, gotRabbitURL string
			missing := report(&out, probes{
				redis: tc.redis,
				postgres: func(url string) (string, error) {
					gotURL = url
					return tc.postgres(url)
				},
				hasPostgresTests: func() bool { return tc.pgTests },
				mysql: func(dsn string) (string, error) {
					gotMySQLURL = dsn
					return tc.mysql(dsn)
				},
				hasMySQLTests: func() bool { return tc.myTests },
				rabbitmq: func(url string) (string, error) {
					gotRabbitURL = url
					return tc.rabbitmq(url)
				},
				hasRabbitTests: func() bool { return tc.rmqTests },
				getenv:         func(k string) string { return tc.env[k] },
			})
			if missing != tc.wantMissing {
				t.Errorf("missing = %v, want %v", missing, tc.wantMissing)
			}
			if n := strings.Count(out.String(), "\n"); n != 4 {
				t.Errorf("%d lines, want one per backend:\n%s", n, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tc.pgTests && gotURL != defaultPostgresURL {
				t.Errorf("probed %q, want the default URL", gotURL)
			}
			if tc.myTests && gotMySQLURL != defaultMySQLURL {
				t.Errorf("probed %q, want the default MySQL DSN", gotMySQLURL)
			}
			if tc.rmqTests && gotRabbitURL != defaultRabbitURL {
				t.Errorf("probed %q, want the default RabbitMQ URL", gotRabbitURL)
			}
		})
	}
}

func TestProbePostgres(t *testing.T) {
	t.Parallel()
	closed := closedPort(t)
	notPostgres := serveOnce(t, "HTTP/1.1 400 Bad Request\r\n\r\n")
	cases := map[string]struct {
		url  string
		want string
	}{
		"nothing listens": {"postgres://postgres@" + closed + "/postgres", "not reachable at " + closed},
		"not PostgreSQL":  {"postgres://postgres@" + notPostgres + "/postgres", "no PostgreSQL at " + notPostgres},
		"not a URL":       {"postgres://%zz", "is not a URL"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := probePostgres(tc.url)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestProbePostgresReal probes the PostgreSQL the tests use, when there is
// one: it accepts the default URL and refuses a role that does not exist.
func TestProbePostgresReal(t *testing.T) {
	t.Parallel()
	url := os.Getenv(postgresURLEnv)
	if url == "" {
		url = defaultPostgresURL
	}
	got, err := probePostgres(url)
	if err != nil {
		if os.Getenv(requirePostgresEnv) == "1" {
			t.Fatal(err)
		}
		t.Skipf("no PostgreSQL to probe (%v); set %s=1 to fail instead", err, requirePostgresEnv)
	}
	if !strings.Contains(got, "PostgreSQL at ") {
		t.Errorf("probe = %q", got)
	}
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.User("no_such_role_for_backends_test")
	_, err = probePostgres(u.String())
	if err == nil || !strings.Contains(err.Error(), "refused user no_such_role_for_backends_test") {
		t.Errorf("err = %v, want a refusal naming the role", err)
	}
}

// closedPort returns a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// serveOnce answers the first connection on a loopback port with reply.
func serveOnce(t *testing.T, reply string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte(reply))
	}()
	return l.Addr().String()
}

func TestProbeMySQL(t *testing.T) {
	t.Parallel()
	closed := closedPort(t)
	notMySQL := serveOnce(t, "\x05\x00\x00\x00HELLO")
	cases := map[string]struct {
		dsn  string
		want string
	}{
		"nothing listens": {"root@tcp(" + closed + ")/", "not reachable at " + closed},
		"not MySQL":       {"root@tcp(" + notMySQL + ")/", "no MySQL at " + notMySQL},
		"not a DSN":       {"mysql://root@localhost", "is not a DSN"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := probeMySQL(tc.dsn)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestProbeMySQLReal probes the MySQL or MariaDB the tests use, when there
// is one: it accepts the default DSN and refuses a user that does not
// exist, and a database that does not exist.
func TestProbeMySQLReal(t *testing.T) {
	t.Parallel()
	dsn := os.Getenv(mysqlURLEnv)
	if dsn == "" {
		dsn = defaultMySQLURL
	}
	got, err := probeMySQL(dsn)
	if err != nil {
		if os.Getenv(requireMySQLEnv) == "1" {
			t.Fatal(err)
		}
		t.Skipf("no MySQL to probe (%v); set %s=1 to fail instead", err, requireMySQLEnv)
	}
	if !strings.Contains(got, " at ") || !strings.HasPrefix(got, "M") {
		t.Errorf("probe = %q", got)
	}
	m := mysqlDSN.FindStringSubmatch(dsn)
	_, err = probeMySQL("no_such_user_for_backends_test:pw@tcp(" + m[3] + ")/")
	if err == nil || !strings.Contains(err.Error(), "refused user no_such_user_for_backends_test") {
		t.Errorf("err = %v, want a refusal naming the user", err)
	}
	_, err = probeMySQL(strings.Replace(dsn, ")/", ")/no_such_database_for_backends_test", 1))
	if err == nil || !strings.Contains(err.Error(), "no_such_database_for_backends_test") {
		t.Errorf("err = %v, want a refusal naming the database", err)
	}
}
