package connecttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest/gen/idempotency/testing/v1/testingv1connect"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// Handler answers one unary call of the TestService: procedure names its
// method.
type Handler func(ctx context.Context, procedure string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error)

// TestService implements the TestService: every unary method with
// Handler, and Stream (bidirectional) as an echo.
type TestService struct {
	Handler Handler
}

var _ testingv1connect.TestServiceHandler = (*TestService)(nil)

// Do implements the unannotated method.
func (s *TestService) Do(ctx context.Context, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
	return s.Handler(ctx, testingv1connect.TestServiceDoProcedure, req)
}

// Required implements the REQUIRED method.
func (s *TestService) Required(ctx context.Context, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
	return s.Handler(ctx, testingv1connect.TestServiceRequiredProcedure, req)
}

// Disabled implements the DISABLED method.
func (s *TestService) Disabled(ctx context.Context, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
	return s.Handler(ctx, testingv1connect.TestServiceDisabledProcedure, req)
}

// Read implements the NO_SIDE_EFFECTS method.
func (s *TestService) Read(ctx context.Context, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
	return s.Handler(ctx, testingv1connect.TestServiceReadProcedure, req)
}

// Keyed implements the method whose key may come from request_id.
func (s *TestService) Keyed(ctx context.Context, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
	return s.Handler(ctx, testingv1connect.TestServiceKeyedProcedure, req)
}

// Tuned implements the method with its own retention and lease.
func (s *TestService) Tuned(ctx context.Context, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
	return s.Handler(ctx, testingv1connect.TestServiceTunedProcedure, req)
}

// Stream implements the bidirectional method: it echoes.
func (s *TestService) Stream(ctx context.Context, stream *connect.BidiStream[testingv1.DoRequest, testingv1.DoResponse]) error {
	return echo(stream)
}

// Streams implements the StreamService, counting executions, as
// internal/test/streamtest's Streams does for grpc-go.
//
// Download sets the header X-Execution to the execution's number and sends
// Amount messages, message i with Amount i, Execution the execution's
// number and Payload "<payload> e<execution> m<i>", sets the trailer
// X-Sent to the number of messages sent, then ends with End's status.
// Upload answers with the sum of the amounts and the payloads joined by
// "+", and Execution, with the header X-Execution. Chat echoes.
type Streams struct {
	// BeforeSend, when set, runs before Download sends message i (from 0);
	// it may block.
	BeforeSend func(ctx context.Context, i int)
	// BeforeAnswer, when set, runs before Upload answers; it may block.
	BeforeAnswer func(ctx context.Context)
	// Finished, when set, runs when Download or Upload returns, with the
	// handler's context and the error it returns.
	Finished func(ctx context.Context, err error)
	// End, when set, gives the status Download ends with after its
	// messages (nil: OK).
	End func(req *testingv1.DoRequest) error

	executions atomic.Int64
	mu         sync.Mutex
	keys       [][]string
}

var _ testingv1connect.StreamServiceHandler = (*Streams)(nil)

// Executions is how many times a handler ran.
func (s *Streams) Executions() int64 { return s.executions.Load() }

// Keys returns the idempotency-key header of each execution, in order.
func (s *Streams) Keys() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys)
}

// start counts an execution and records its keys.
func (s *Streams) start(h http.Header) int64 {
	s.mu.Lock()
	s.keys = append(s.keys, h.Values(idempotency.MetadataKey))
	s.mu.Unlock()
	return s.executions.Add(1)
}

// finish runs Finished, if set, with the error a handler returns.
func (s *Streams) finish(ctx context.Context, err error) {
	if s.Finished != nil {
		s.Finished(ctx, err)
	}
}

// Download implements the server-streaming method.
func (s *Streams) Download(ctx context.Context, req *connect.Request[testingv1.DoRequest], stream *connect.ServerStream[testingv1.DoResponse]) (err error) {
	defer func() { s.finish(ctx, err) }()
	n := s.start(req.Header())
	stream.ResponseHeader().Set("X-Execution", strconv.FormatInt(n, 10))
	sent := 0
	for i := range req.Msg.GetAmount() {
		if s.BeforeSend != nil {
			s.BeforeSend(ctx, int(i))
		}
		msg := &testingv1.DoResponse{Payload: fmt.Sprintf("%s e%d m%d", req.Msg.GetPayload(), n, i), Amount: i, Execution: n}
		if err := stream.Send(msg); err != nil {
			return err
		}
		sent++
	}
	stream.ResponseTrailer().Set("X-Sent", strconv.Itoa(sent))
	if s.End != nil {
		return s.End(req.Msg)
	}
	return nil
}

// Upload implements the client-streaming method.
func (s *Streams) Upload(ctx context.Context, stream *connect.ClientStream[testingv1.DoRequest]) (_ *connect.Response[testingv1.DoResponse], err error) {
	defer func() { s.finish(ctx, err) }()
	n := s.start(stream.RequestHeader())
	var sum int64
	var payloads []string
	for stream.Receive() {
		sum += stream.Msg().GetAmount()
		payloads = append(payloads, stream.Msg().GetPayload())
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if s.BeforeAnswer != nil {
		s.BeforeAnswer(ctx)
	}
	resp := connect.NewResponse(&testingv1.DoResponse{Payload: strings.Join(payloads, "+"), Amount: sum, Execution: n})
	resp.Header().Set("X-Execution", strconv.FormatInt(n, 10))
	return resp, nil
}

// Chat implements the bidirectional method: it echoes.
func (s *Streams) Chat(ctx context.Context, stream *connect.BidiStream[testingv1.DoRequest, testingv1.DoResponse]) error {
	s.start(stream.RequestHeader())
	return echo(stream)
}

// echo sends back each request's payload until the client closes its side.
func echo(stream *connect.BidiStream[testingv1.DoRequest, testingv1.DoResponse]) error {
	for {
		req, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testingv1.DoResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}
