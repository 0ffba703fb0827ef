package idempotency_test

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

// TestOutcomeThatPanicsIsNotRetained: a handler's answer whose encoding
// panics (a nil *dynamicpb.Message, which has no descriptor) completes
// the key as not retained, as any answer that cannot be encoded does
// (decision 30): the panic does not escape after the handler ran, which
// would leave its claim in flight until the lease ends and run it again.
func TestOutcomeThatPanicsIsNotRetained(t *testing.T) {
	t.Parallel()
	files := dynamicFiles(t)
	md := mustFind[protoreflect.ServiceDescriptor](t, files, "dyn.v1.Payments").Methods().Get(0)
	const full = "/dyn.v1.Payments/Charge"
	var ran atomic.Int64
	ev := &events{}
	intercept := idempotency.UnaryServerInterceptor(memStore(t), idempotency.WithDescriptors(files), idempotency.WithObserver(ev))
	handle := func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		req := dynamicpb.NewMessage(md.Input())
		if err := dec(req); err != nil {
			return nil, err
		}
		resp, err := intercept(ctx, req, &grpc.UnaryServerInfo{FullMethod: full}, func(context.Context, any) (any, error) {
			ran.Add(1)
			return (*dynamicpb.Message)(nil), nil
		})
		if m, ok := resp.(*dynamicpb.Message); ok && m == nil {
			// grpc-go itself panics encoding it: answer as a layer
			// between the two would.
			return nil, status.Error(codes.Internal, "nil response")
		}
		return resp, err
	}
	srv := testserver.NewWith(t, &testserver.Service{}, func(r grpc.ServiceRegistrar) {
		r.RegisterService(&grpc.ServiceDesc{
			ServiceName: "dyn.v1.Payments",
			HandlerType: (*any)(nil),
			Methods:     []grpc.MethodDesc{{MethodName: "Charge", Handler: handle}},
			Metadata:    md.ParentFile().Path(),
		}, struct{}{})
	})
	cc := srv.Dial(t)
	for n := range 2 {
		err := cc.Invoke(withKey(t.Context(), "k-1"), full, dynamicpb.NewMessage(md.Input()), dynamicpb.NewMessage(md.Output()))
		if n == 1 && (status.Code(err) != codes.FailedPrecondition || idempotency.Reason(err) != idempotency.ErrResponseNotRetained.Reason) {
			t.Fatalf("retry: %v, want FAILED_PRECONDITION %s", err, idempotency.ErrResponseNotRetained.Reason)
		}
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if n := ev.Count(idempotency.DecisionNotRetained); n != 1 {
		t.Fatalf("observer saw %d %v events, want 1", n, idempotency.DecisionNotRetained)
	}
}
