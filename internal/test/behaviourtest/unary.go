package behaviourtest

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// callIDKey is the metadata that carries a call's id to the work.
const callIDKey = "behaviour-call"

// unaryEntry calls the test service's unannotated method over bufconn,
// through a recovery interceptor (which answers a panic INTERNAL and sees
// the caller leave) and the idempotency interceptor.
type unaryEntry struct{ client testingv1.TestServiceClient }

func newUnary(t *testing.T, e *Env) Caller {
	t.Helper()
	srv := idempotency.NewServer(e.Store, e.Opts...)
	handler := func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return e.Work(ctx, callID(ctx))
	}
	recovery := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		id := callID(ctx)
		stop := context.AfterFunc(ctx, func() { e.Left(id) })
		defer stop()
		defer func() {
			if r := recover(); r != nil {
				resp, err = nil, status.Error(codes.Internal, "the handler panicked")
			}
		}()
		return h(ctx, req)
	}
	ts := testserver.New(t, &testserver.Service{Handler: handler},
		grpc.ChainUnaryInterceptor(recovery, srv.UnaryServerInterceptor()))
	return &unaryEntry{client: ts.Client(t)}
}

func callID(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(callIDKey); len(v) == 1 {
		return v[0]
	}
	return ""
}

func (u *unaryEntry) Call(ctx context.Context, key string, req int, id string) Result {
	ctx = metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, key, callIDKey, id)
	var header, trailer metadata.MD
	resp, err := u.client.Do(ctx, Request(req), grpc.Header(&header), grpc.Trailer(&trailer))
	st := status.Convert(err)
	_, ri := testkit.ErrorInfo(err)
	r := Result{
		Replayed: idempotency.Replayed(header, trailer),
		Reason:   testkit.ClientReason(err),
		Code:     st.Code().String(),
		Retry:    ri != nil && len(trailer.Get("grpc-retry-pushback-ms")) == 1,
	}
	if err != nil {
		r.Answer, _ = proto.Marshal(st.Proto())
	} else {
		r.Answer, _ = proto.MarshalOptions{Deterministic: true}.Marshal(resp)
	}
	return r
}

// Request returns request variant n (0 or 1), the request of a call's req.
func Request(n int) *testingv1.DoRequest {
	return &testingv1.DoRequest{Payload: "request", Amount: int64(n)}
}
