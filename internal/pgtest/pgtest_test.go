package pgtest_test

import (
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/pgtest"
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
