// Package idempotency_test holds the root package's tests that need a real
// Redis or PostgreSQL, in a module of its own so that the root package's
// tests link neither driver. The package keeps the name the tests had in
// the root directory.
package idempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// The rig shared with the root package's tests lives in internal/test/testkit,
// and waiting in internal/test/wait.
var (
	withKey         = testkit.WithKey
	errorInfo       = testkit.ErrorInfo
	wantReason      = testkit.WantReason
	clientReason    = testkit.ClientReason
	waitFor         = wait.For
	newDirectServer = testkit.NewDirectServer
)

// events is the recorder of observer events, [testkit.Events].
type events = testkit.Events

// storeBackends returns a constructor per real store: the memory store, and
// the Redis store on a redis-server of its own.
func storeBackends() map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"memory": func(t *testing.T) store.Store {
			mem := testkit.NewMemoryStore(t)
			return mem
		},
		"redis": func(t *testing.T) store.Store { return redisstore.New(redistest.StartServer(t).Client()) },
	}
}
