package migratestore_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/testkit"
)

// TestMoveOverServers follows the procedure of docs/operations.md over real
// gRPC servers, from one memory store to another (the integration module
// runs it from one Redis prefix to another).
func TestMoveOverServers(t *testing.T) {
	t.Parallel()
	testkit.MoveOverServers(t, newMemory(t), newMemory(t))
}
