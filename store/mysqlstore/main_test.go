package mysqlstore_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// TestMain drops the package's test database at the end. Examples cannot
// skip themselves: without a server, and unless IDEMPOTENCY_REQUIRE_MYSQL
// is 1, they are left out (-test.skip) with the same message the tests
// skip with.
func TestMain(m *testing.M) {
	flag.Parse()
	if _, err := mysqltest.DatabaseDSN(); err != nil && os.Getenv(mysqltest.RequireEnv) != "1" {
		fmt.Fprintf(os.Stderr, "mysqlstore: examples skipped: no MySQL server (%v); set %s\n", err, mysqltest.URLEnv)
		_ = flag.Set("test.skip", "^Example")
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(mysqltest.Exit))
}
