package streamtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
)

// Full names of the StreamService methods, whose idempotency options make
// them take part on both sides: Upload and Download are REQUIRED with
// key_field request_id, Chat is a bidirectional method with an option (a
// configuration error).
const (
	UploadMethod   = testingv1.StreamService_Upload_FullMethodName
	DownloadMethod = testingv1.StreamService_Download_FullMethodName
	ChatMethod     = testingv1.StreamService_Chat_FullMethodName
)

// Streams implements the StreamService, counting executions.
//
// Download sets the header x-execution to the execution's number and sends
// Amount messages, message i with Amount i, Execution the execution's
// number and Payload "<payload> e<execution> m<i>", then ends with End's
// status. Upload answers with the sum of the amounts and the payloads
// joined by "+", and Execution. Chat echoes.
type Streams struct {
	testingv1.UnimplementedStreamServiceServer

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

// Executions is how many times a handler ran.
func (s *Streams) Executions() int64 { return s.executions.Load() }

// Keys returns the idempotency-key metadata of each execution, in order.
func (s *Streams) Keys() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys)
}

// start counts an execution and records its keys.
func (s *Streams) start(ctx context.Context) int64 {
	s.mu.Lock()
	s.keys = append(s.keys, metadata.ValueFromIncomingContext(ctx, idempotency.MetadataKey))
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
func (s *Streams) Download(req *testingv1.DoRequest, stream grpc.ServerStreamingServer[testingv1.DoResponse]) (err error) {
	defer func() { s.finish(stream.Context(), err) }()
	n := s.start(stream.Context())
	if err := stream.SetHeader(metadata.Pairs("x-execution", strconv.FormatInt(n, 10))); err != nil {
		return err
	}
	for i := range req.GetAmount() {
		if s.BeforeSend != nil {
			s.BeforeSend(stream.Context(), int(i))
		}
		msg := &testingv1.DoResponse{Payload: fmt.Sprintf("%s e%d m%d", req.GetPayload(), n, i), Amount: i, Execution: n}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	if s.End != nil {
		return s.End(req)
	}
	return nil
}

// Upload implements the client-streaming method.
func (s *Streams) Upload(stream grpc.ClientStreamingServer[testingv1.DoRequest, testingv1.DoResponse]) (err error) {
	defer func() { s.finish(stream.Context(), err) }()
	n := s.start(stream.Context())
	var sum int64
	var payloads []string
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		sum += req.GetAmount()
		payloads = append(payloads, req.GetPayload())
	}
	if s.BeforeAnswer != nil {
		s.BeforeAnswer(stream.Context())
	}
	return stream.SendAndClose(&testingv1.DoResponse{Payload: strings.Join(payloads, "+"), Amount: sum, Execution: n})
}

// Chat implements the bidirectional method: it echoes.
func (s *Streams) Chat(stream grpc.BidiStreamingServer[testingv1.DoRequest, testingv1.DoResponse]) error {
	s.start(stream.Context())
	for {
		req, err := stream.Recv()
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

// Proxied serves svc (a [Streams], or another implementation) with
// [testserver.StartLoopback], behind s's stream and unary interceptors
// (none when s is nil) and a fault proxy, and returns a client connection
// through the proxy, dialled with opts, and the proxy: cutting its
// connections is a real network cut. Everything stops when the test ends.
func Proxied(tb testing.TB, svc testingv1.StreamServiceServer, s *idempotency.Server, opts ...grpc.DialOption) (*grpc.ClientConn, *faultproxy.Proxy) {
	tb.Helper()
	srv := testserver.StartLoopback(tb, func(r grpc.ServiceRegistrar) { testingv1.RegisterStreamServiceServer(r, svc) }, interceptors(s)...)
	proxy, err := faultproxy.New(srv.Addr())
	if err != nil {
		tb.Fatalf("streamtest: proxy: %v", err)
	}
	tb.Cleanup(func() { _ = proxy.Close() })
	return testserver.Dial(tb, "passthrough:///"+proxy.Addr(), opts...), proxy
}
