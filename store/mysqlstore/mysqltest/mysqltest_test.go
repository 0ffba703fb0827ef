package mysqltest_test

import (
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

func TestMain(m *testing.M) {
	mysqltest.Exit(m.Run())
}

// TestPackageDatabase: every test of a package gets the same fresh
// database, named after the package, on the server of IDEMPOTENCY_MYSQL_URL.
func TestPackageDatabase(t *testing.T) {
	t.Parallel()
	names := make([]string, 2)
	for i := range names {
		if err := mysqltest.DB(t, 1).QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&names[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(names[0], "idempotency_test_mysqltest_") {
		t.Fatalf("database %q, want one named idempotency_test_mysqltest_*", names[0])
	}
	if names[0] != names[1] {
		t.Fatalf("two databases in one package: %q and %q", names[0], names[1])
	}
	if !strings.Contains(mysqltest.DSN(t), "/"+names[0]) {
		t.Fatalf("DSN %q does not name the database %q", mysqltest.DSN(t), names[0])
	}
}

// TestNewDatabase: a database of the test's own, beside the package's,
// dropped when the test ends.
func TestNewDatabase(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("create", func(t *testing.T) {
		cfg, err := mysql.ParseDSN(mysqltest.NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := mysqltest.DBFrom(t, cfg, 1).QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		pkg := mysqltest.Config(t).DBName
		if name == pkg || !strings.HasPrefix(name, pkg+"_") {
			t.Fatalf("database %q, want one of its own named after the package's %q", name, pkg)
		}
	})
	var n int
	if err := mysqltest.DB(t, 1).QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %q still there after its test ended", name)
	}
}

// TestRoundTrips: the counter sees each query, each preparation and each
// execution of a prepared statement, by its SQL, and nothing else.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	trips := &mysqltest.RoundTrips{Match: "counted"}
	cfg := mysqltest.Config(t)
	trips.Install(cfg)
	db := mysqltest.DBFrom(t, cfg, 1)
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, "SELECT 'not this one'"); err != nil {
		t.Fatal(err)
	}
	trips.Reset()
	st, err := db.PrepareContext(ctx, "SELECT ? AS counted")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range 3 {
		var v int
		if err := st.QueryRowContext(ctx, 1).Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, "DO 'counted'"); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range trips.Commands() {
		kinds = append(kinds, c.Kind)
	}
	if got := strings.Join(kinds, " "); got != "prepare execute execute execute query" {
		t.Fatalf("commands %q, want one prepare, three executions and a query", got)
	}
	if n, s := trips.Count(), trips.Statements(); n != 5 || s != 4 {
		t.Fatalf("%d round trips and %d statements, want 5 and 4", n, s)
	}
}
