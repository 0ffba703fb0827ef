package sqlitestore_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestInvalidationsEndWithClose: a subscription whose context lives on
// ends when its store closes (its prepared statements closed).
func TestInvalidationsEndWithClose(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	storetest.CheckEndsWithClose(t, s)
}
