package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"go.uber.org/goleak"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// TestMain makes the test binary idempotencyctl when the scripts run it
// (testscript.Main puts it on their PATH under that name), and otherwise
// runs the tests, checks for leaked goroutines and drops the PostgreSQL
// and MySQL test databases, if a test made them.
func TestMain(m *testing.M) {
	testscript.Main(checked{m}, map[string]func(){"idempotencyctl": main})
}

// checked runs the tests, then the checks of the other modules' TestMain.
type checked struct{ m *testing.M }

func (c checked) Run() int {
	code := c.m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	if err := pgtest.Drop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		code = 1
	}
	if err := mysqltest.Drop(); err != nil {
		fmt.Fprintf(os.Stderr, "mysqltest: %v\n", err)
		code = 1
	}
	return code
}
