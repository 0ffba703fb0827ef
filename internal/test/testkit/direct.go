package testkit

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// DirectServer calls the server interceptor as a function, with an
// incoming-metadata context, so tests can send metadata that grpc-go's
// client refuses to put on the wire (control characters, non-ASCII).
type DirectServer struct {
	intercept grpc.UnaryServerInterceptor
	// Store is the fault store over the memory store the interceptor uses.
	Store *faultstore.Store
	// Ran counts the handler's executions.
	Ran atomic.Int64
}

// NewDirectServer returns a DirectServer over a memory store of its own,
// closed when the test ends.
func NewDirectServer(t testing.TB, opts ...idempotency.ServerOption) *DirectServer {
	t.Helper()
	mem := memorystore.New()
	t.Cleanup(func() { _ = mem.Close() })
	fs := faultstore.New(mem)
	return &DirectServer{intercept: idempotency.UnaryServerInterceptor(fs, opts...), Store: fs}
}

// Call runs one request with md as its incoming metadata.
func (d *DirectServer) Call(ctx context.Context, md metadata.MD, req *testingv1.DoRequest) (any, error) {
	info := &grpc.UnaryServerInfo{FullMethod: testingv1.TestService_Do_FullMethodName}
	return d.intercept(metadata.NewIncomingContext(ctx, md), req, info, func(context.Context, any) (any, error) {
		n := d.Ran.Add(1)
		return &testingv1.DoResponse{Payload: req.GetPayload(), Execution: n}, nil
	})
}

// WantRefusedKey fails the test unless err is INVALID_ARGUMENT
// IDEMPOTENCY_KEY_INVALID whose message does not echo key, with the
// handler not run and the store not touched.
func (d *DirectServer) WantRefusedKey(t testing.TB, err error, key string) {
	t.Helper()
	WantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyInvalid.Reason)
	if msg := status.Convert(err).Message(); len(key) >= 4 && strings.Contains(msg, key) {
		t.Fatalf("error message %q echoes the key", msg)
	}
	if n := d.Ran.Load(); n != 0 {
		t.Fatalf("handler ran %d times for a refused key", n)
	}
	if calls := d.Store.Calls(); len(calls) != 0 {
		t.Fatalf("store was called for a refused key: %v", calls)
	}
}
