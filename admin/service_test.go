package admin_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/test/admintest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// The admin service's cases (internal/test/admintest) on the memory store; the
// integration module runs them on Redis and PostgreSQL.
func TestService(t *testing.T) {
	t.Parallel()
	admintest.Run(t, func(t *testing.T) store.Store { return testkit.NewMemoryStore(t) })
}
