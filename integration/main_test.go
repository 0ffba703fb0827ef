package idempotency_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// TestMain checks for leaked goroutines and drops the PostgreSQL and MySQL
// test databases, if a test made them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if err := mysqltest.Drop(); err != nil {
			fmt.Fprintf(os.Stderr, "mysqltest: %v\n", err)
		}
		pgtest.Exit(code)
	}))
}
