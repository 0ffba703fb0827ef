package pgtest_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Exit(m.Run())
}

// TestPackageDatabase: every test of a package gets the same fresh
// database, named after the package, on the server of IDEMPOTENCY_POSTGRES_URL.
func TestPackageDatabase(t *testing.T) {
	t.Parallel()
	names := make([]string, 2)
	for i := range names {
		var name string
		if err := pgtest.Pool(t, 1).QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		names[i] = name
	}
	if !strings.HasPrefix(names[0], "idempotency_test_pgtest_") {
		t.Fatalf("database %q, want one named idempotency_test_pgtest_*", names[0])
	}
	if names[0] != names[1] {
		t.Fatalf("two databases in one package: %q and %q", names[0], names[1])
	}
	if !strings.Contains(pgtest.URL(t), "/"+names[0]) {
		t.Fatalf("URL %q does not name the database %q", pgtest.URL(t), names[0])
	}
}

// TestNewDatabase: a database of the test's own, beside the package's,
// with its settings applied to new connections, dropped when the test
// ends.
func TestNewDatabase(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("create", func(t *testing.T) {
		pool := pgtest.PoolFrom(t, mustConfig(t, pgtest.NewDatabase(t, "default_transaction_isolation = 'serializable'")))
		var level string
		if err := pool.QueryRow(t.Context(), "SELECT current_database(), current_setting('default_transaction_isolation')").Scan(&name, &level); err != nil {
			t.Fatal(err)
		}
		var pkg string
		if err := pgtest.Pool(t, 1).QueryRow(t.Context(), "SELECT current_database()").Scan(&pkg); err != nil {
			t.Fatal(err)
		}
		if name == pkg || !strings.HasPrefix(name, pkg+"_") {
			t.Fatalf("database %q, want one of its own named after the package's %q", name, pkg)
		}
		if level != "serializable" {
			t.Fatalf("default_transaction_isolation %q, want the setting applied", level)
		}
	})
	var exists bool
	if err := pgtest.Pool(t, 1).QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %q outlived its test", name)
	}
}

func mustConfig(t *testing.T, url string) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
