package idempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/test/admintest"
	"github.com/grpc-idempotency/idempotency/store"
)

// The admin service's cases (internal/test/admintest) on Redis and PostgreSQL:
// look up a response, an error, a stream and an HTTP answer, list by
// state and age, purge completed and in-flight keys fenced by their etag,
// authorization, and the counts. The admin package runs them on the
// memory store.
func TestAdminService(t *testing.T) {
	t.Parallel()
	for name, newStore := range limitBackends() {
		if name == "memory" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			admintest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
		})
	}
}
