package postgresstore_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// TestMain drops the package's test database at the end. Examples cannot
// skip themselves: without a server, and unless IDEMPOTENCY_REQUIRE_POSTGRES
// is 1, they are left out (-test.skip) with the same message the tests
// skip with.
func TestMain(m *testing.M) {
	flag.Parse()
	if _, err := pgtest.DatabaseURL(); err != nil && os.Getenv(pgtest.RequireEnv) != "1" {
		fmt.Fprintf(os.Stderr, "postgresstore: examples skipped: no PostgreSQL server (%v); set %s\n", err, pgtest.URLEnv)
		_ = flag.Set("test.skip", "^Example")
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.Exit))
}
