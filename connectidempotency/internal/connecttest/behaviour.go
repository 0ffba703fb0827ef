package connecttest

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest/gen/idempotency/testing/v1/testingv1connect"
	"github.com/grpc-idempotency/idempotency/httpidempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/behaviourtest"
)

// CallIDHeader carries a call's id to the work; the fingerprint (the
// request message) does not cover it.
const CallIDHeader = "Behaviour-Call"

// EntryPoints returns the behaviour table's entry points for a connect-go
// handler interceptor: the TestService's unannotated method Do behind
// newInterceptor(s), over a real server, one entry point per protocol (the
// Connect protocol over HTTP/1.1, gRPC over HTTP/2, gRPC-Web over
// HTTP/1.1), each called by a plain connect-go client of its protocol.
func EntryPoints(newInterceptor func(s *idempotency.Server) connect.Interceptor) []behaviourtest.EntryPoint {
	var eps []behaviourtest.EntryPoint
	for _, ep := range []struct {
		name string
		p    Protocol
	}{{"Connect", Protocols[0]}, {"ConnectGRPC", Protocols[2]}, {"ConnectGRPCWeb", Protocols[3]}} {
		p := ep.p
		eps = append(eps, behaviourtest.EntryPoint{
			Name: ep.name,
			New: func(t *testing.T, e *behaviourtest.Env) behaviourtest.Caller {
				return newEntry(t, e, p, newInterceptor(idempotency.NewServer(e.Store, e.Opts...)))
			},
		})
	}
	return eps
}

// entry calls the TestService's Do through one protocol.
type entry struct {
	client testingv1connect.TestServiceClient
}

// newEntry serves the TestService behind a recovery interceptor, which
// answers a panic INTERNAL and sees the caller leave, and then i.
func newEntry(t *testing.T, e *behaviourtest.Env, p Protocol, i connect.Interceptor) *entry {
	svc := &TestService{Handler: func(ctx context.Context, _ string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
		resp, err := e.Work(ctx, req.Header().Get(CallIDHeader))
		if err != nil {
			st := status.Convert(err)
			return nil, connect.NewError(connect.Code(st.Code()), errors.New(st.Message()))
		}
		return connect.NewResponse(resp), nil
	}}
	recovery := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (resp connect.AnyResponse, err error) {
			id := req.Header().Get(CallIDHeader)
			stop := context.AfterFunc(ctx, func() { e.Left(id) })
			defer stop()
			defer func() {
				if r := recover(); r != nil {
					resp, err = nil, connect.NewError(connect.CodeInternal, errors.New("the handler panicked"))
				}
			}()
			return next(ctx, req)
		}
	})
	mux := http.NewServeMux()
	mux.Handle(testingv1connect.NewTestServiceHandler(svc, connect.WithInterceptors(recovery, i)))
	s := Serve(t, mux, p)
	return &entry{client: testingv1connect.NewTestServiceClient(s.HTTP, s.URL, p.Options...)}
}

func (c *entry) Call(ctx context.Context, key string, req int, id string) behaviourtest.Result {
	r := connect.NewRequest(behaviourtest.Request(req))
	r.Header().Set(idempotency.MetadataKey, key)
	r.Header().Set(CallIDHeader, id)
	resp, err := c.client.Do(ctx, r)
	if err == nil {
		answer, _ := proto.MarshalOptions{Deterministic: true}.Marshal(resp.Msg)
		return behaviourtest.Result{Code: "OK", Replayed: Replayed(resp.Header()), Answer: answer}
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return behaviourtest.Result{Code: "error"}
	}
	ei, ri := ErrorInfo(ce)
	res := behaviourtest.Result{
		Code:     codes.Code(ce.Code()).String(),
		Replayed: Replayed(ce.Meta()),
		Retry:    ri != nil && ce.Meta().Get("Grpc-Retry-Pushback-Ms") != "",
		Answer:   StatusBytes(ce),
	}
	if ei != nil {
		res.Reason = ei.GetReason()
	}
	return res
}

// Replayed reports whether h carries the replay marker: Idempotent-Replayed
// on the Connect protocol, idempotency-replayed on gRPC and gRPC-Web.
func Replayed(h http.Header) bool {
	return h.Get(httpidempotency.ReplayedHeader) == "true" || h.Get(idempotency.ReplayedKey) == "true"
}

// ErrorInfo returns the google.rpc.ErrorInfo of the library's domain and
// the google.rpc.RetryInfo that ce's details hold, nil for none.
func ErrorInfo(ce *connect.Error) (*errdetails.ErrorInfo, *errdetails.RetryInfo) {
	var ei *errdetails.ErrorInfo
	var ri *errdetails.RetryInfo
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			continue
		}
		switch v := v.(type) {
		case *errdetails.ErrorInfo:
			if v.GetDomain() == idempotency.ErrorDomain {
				ei = v
			}
		case *errdetails.RetryInfo:
			ri = v
		}
	}
	return ei, ri
}

// StatusBytes is ce's code, message and details as a google.rpc.Status,
// encoded, to compare a replayed error with the original byte for byte.
func StatusBytes(ce *connect.Error) []byte {
	st := &spb.Status{Code: int32(ce.Code()), Message: ce.Message()}
	for _, d := range ce.Details() {
		st.Details = append(st.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(st)
	return b
}
