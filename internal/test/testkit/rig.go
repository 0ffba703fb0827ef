package testkit

import (
	"testing"

	"google.golang.org/grpc"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// Config configures [Serve]. The zero value serves [testserver.Echo]
// behind a Server with the default options, over a fault store wrapping a
// memory store of the rig's own.
type Config struct {
	// Handler answers the test service's unary methods; nil is
	// [testserver.Echo].
	Handler testserver.HandlerFunc
	// Store is the store behind the interceptors. Nil is a fault store
	// over a memory store closed when the test ends ([Rig.Faults]).
	Store store.Store
	// Options are the Server's options, given after the WithObserver of
	// Events: an observer among them takes its place.
	Options []idempotency.ServerOption
	// Events records the Server's events; nil is a new recorder.
	Events *Events
	// Outer are unary interceptors that run outside the idempotency
	// interceptor, in order (a recorder of attempts, a fault, a recovery).
	Outer []grpc.UnaryServerInterceptor
	// ServerOptions are more options of the gRPC server (a stats handler),
	// given after the interceptors'.
	ServerOptions []grpc.ServerOption
	// Register, when set, adds more services to the gRPC server.
	Register func(grpc.ServiceRegistrar)
}

// Rig is a test server started by [Serve]: the embedded
// [testserver.Server] dials it ([testserver.Server.Client]) and counts its
// executions ([testserver.Service.Executions]).
type Rig struct {
	*testserver.Server
	// Idempotency is the Server whose unary and stream interceptors the
	// test service runs behind.
	Idempotency *idempotency.Server
	// Events records the Server's events (none when Config.Options set
	// another observer).
	Events *Events
	// Store is the store behind the interceptors: Config.Store, or Faults.
	Store store.Store
	// Faults is the rig's own fault store when Config.Store is nil, and
	// nil otherwise.
	Faults *faultstore.Store
}

// Serve starts the test service on a bufconn server (see [testserver]),
// behind cfg.Outer and then the unary interceptor of a Server over
// cfg.Store, and behind its stream interceptor; everything stops when the
// test ends, the Server closed ([idempotency.Server.Close]).
func Serve(tb testing.TB, cfg Config) *Rig {
	tb.Helper()
	r := &Rig{Events: cfg.Events, Store: cfg.Store}
	if r.Events == nil {
		r.Events = &Events{}
	}
	if r.Store == nil {
		r.Faults = faultstore.New(NewMemoryStore(tb))
		r.Store = r.Faults
	}
	r.Idempotency = idempotency.NewServer(r.Store, append([]idempotency.ServerOption{idempotency.WithObserver(r.Events)}, cfg.Options...)...)
	tb.Cleanup(func() { _ = r.Idempotency.Close() })
	chain := append(append([]grpc.UnaryServerInterceptor(nil), cfg.Outer...), r.Idempotency.UnaryServerInterceptor())
	opts := append([]grpc.ServerOption{
		grpc.ChainUnaryInterceptor(chain...),
		grpc.ChainStreamInterceptor(r.Idempotency.StreamServerInterceptor()),
	}, cfg.ServerOptions...)
	r.Server = testserver.NewWith(tb, &testserver.Service{Handler: cfg.Handler}, cfg.Register, opts...)
	return r
}

// NewMemoryStore returns a memory store with opts, closed when the test
// ends.
func NewMemoryStore(tb testing.TB, opts ...memorystore.Option) *memorystore.Store {
	tb.Helper()
	mem := memorystore.New(opts...)
	tb.Cleanup(func() { _ = mem.Close() })
	return mem
}
