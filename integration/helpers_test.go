// Package idempotency_test holds the root package's tests that need a real
// Redis or PostgreSQL, in a module of its own so that the root package's
// tests link neither driver. The package keeps the name the tests had in
// the root directory.
package idempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/redistest"
	"github.com/grpc-idempotency/idempotency/internal/testkit"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// The helpers shared with the root package's tests live in internal/testkit.
var (
	withKey         = testkit.WithKey
	errorInfo       = testkit.ErrorInfo
	wantReason      = testkit.WantReason
	clientReason    = testkit.ClientReason
	waitFor         = testkit.WaitFor
	newDirectServer = testkit.NewDirectServer
)

// events records observer events; count is [testkit.Events.Count].
type events struct{ testkit.Events }

func (e *events) count(o idempotency.Decision) int { return e.Count(o) }

// all returns the events so far, in order.
func (e *events) all() []idempotency.Event { return e.All() }

// storeBackends returns a constructor per real store: the memory store, and
// the Redis store on a redis-server of its own.
func storeBackends() map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"memory": func(t *testing.T) store.Store {
			mem := memorystore.New()
			t.Cleanup(func() { _ = mem.Close() })
			return mem
		},
		"redis": func(t *testing.T) store.Store { return redisstore.New(redistest.StartServer(t).Client()) },
	}
}
