package postgresstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/grpc-idempotency/idempotency/internal/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(pgtest.Exit))
}
