package idempotency_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/grpc-idempotency/idempotency/internal/pgtest"
)

// TestMain checks for leaked goroutines and drops the PostgreSQL test
// database, if a test made one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.Exit)) }
