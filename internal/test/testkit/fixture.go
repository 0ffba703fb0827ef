package testkit

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// Fixture is a [Rig] with what most tests start from: a client of the test
// service dialed to it, and a recorder of every call the server sees.
// Its Faults is the fault store behind the interceptors whenever there is
// one: the rig's own, or Config.Store when that is a fault store.
type Fixture struct {
	*Rig
	// Client is a client of the test service dialed to the rig, without
	// client interceptors ([Fixture.ClientWith] dials one with them). It
	// hides [testserver.Server.Client], which f.Server.Client still
	// reaches.
	Client testingv1.TestServiceClient
	// Attempts records every call as the server saw it, before
	// Config.Outer and the idempotency interceptor.
	Attempts *Attempts
}

// Start is [Serve] with a recorder of attempts outside cfg.Outer (the
// chain is recorder → cfg.Outer → idempotency → handler) and a client
// dialed to the server. A nil entry of cfg.Outer is skipped, so that a
// table's optional fault goes in as it is.
func Start(tb testing.TB, cfg Config) *Fixture {
	tb.Helper()
	attempts := &Attempts{}
	outer := []grpc.UnaryServerInterceptor{attempts.Record}
	for _, o := range cfg.Outer {
		if o != nil {
			outer = append(outer, o)
		}
	}
	cfg.Outer = outer
	f := &Fixture{Rig: Serve(tb, cfg), Attempts: attempts}
	if fs, ok := cfg.Store.(*faultstore.Store); ok {
		f.Faults = fs
	}
	f.Client = f.Server.Client(tb)
	return f
}

// NewFixture starts a [Fixture] serving h (nil is [testserver.Echo])
// behind a Server with opts, over a fault store wrapping a memory store of
// its own.
func NewFixture(tb testing.TB, h testserver.HandlerFunc, opts ...idempotency.ServerOption) *Fixture {
	tb.Helper()
	return Start(tb, Config{Handler: h, Options: opts})
}

// NewFixtureOn is [NewFixture] over fs, which several fixtures may share
// as the replicas of one service share a store.
func NewFixtureOn(tb testing.TB, fs *faultstore.Store, h testserver.HandlerFunc, opts ...idempotency.ServerOption) *Fixture {
	tb.Helper()
	return Start(tb, Config{Handler: h, Store: fs, Options: opts})
}

// ClientWith dials the fixture with the client interceptors given, chained
// in that order.
func (f *Fixture) ClientWith(tb testing.TB, interceptors ...grpc.UnaryClientInterceptor) testingv1.TestServiceClient {
	tb.Helper()
	return f.Server.Client(tb, grpc.WithChainUnaryInterceptor(interceptors...))
}

// Attempt is one call as the server saw it, before the interceptors of
// Config.Outer.
type Attempt struct {
	// Method is the full method name.
	Method string
	// Keys are the values of the idempotency-key metadata.
	Keys []string
	// MD is all of the request metadata.
	MD metadata.MD
	// At is when the server saw the call.
	At time.Time
}

// Attempts records every call that goes through [Attempts.Record].
type Attempts struct {
	mu   sync.Mutex
	list []Attempt
}

// Record is a unary server interceptor that records the call and passes it
// on.
func (a *Attempts) Record(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	at := Attempt{Method: info.FullMethod, Keys: md.Get(idempotency.MetadataKey), MD: md, At: time.Now()}
	a.mu.Lock()
	a.list = append(a.list, at)
	a.mu.Unlock()
	return handler(ctx, req)
}

// All returns the attempts recorded so far, in order.
func (a *Attempts) All() []Attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Attempt(nil), a.list...)
}

// WantOneKey fails the test unless every attempt carried exactly one key,
// the same one, and returns it.
func WantOneKey(tb testing.TB, attempts []Attempt) string {
	tb.Helper()
	if len(attempts) == 0 {
		tb.Fatal("the server saw no attempt")
	}
	for i, a := range attempts {
		if len(a.Keys) != 1 || a.Keys[0] != attempts[0].Keys[0] {
			tb.Fatalf("attempt %d carried keys %q, attempt 1 carried %q", i+1, a.Keys, attempts[0].Keys)
		}
	}
	return attempts[0].Keys[0]
}
