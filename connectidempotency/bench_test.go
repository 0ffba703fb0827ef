package connectidempotency_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest/gen/idempotency/testing/v1/testingv1connect"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// The stream rows send streams of streamMessages messages of
// streamMessageSize bytes, as the root package's BenchmarkStream does.
const streamMessages, streamMessageSize = 100, 64

// BenchmarkConnect compares bare connect-go handlers with the same
// handlers behind the handler interceptor on a memory store, over a real
// httptest server (loopback TCP, HTTP/1.1, the Connect protocol, binary
// Protobuf), so each row includes connect-go's client and server, net/http
// and the network stack:
//
//   - unary rows call the TestService's Do, executed (a new key every
//     call) or replayed (one key, stored before the timer starts), at 1 and
//     64 concurrent callers;
//   - stream rows call the StreamService's Download, a server stream of
//     100 messages of 64 bytes, executed under a new key (each message
//     recorded, the outcome stored) or replayed from the store; msgs/s
//     counts the messages received.
//
// Compare each row with bare of the same kind and callers in the same run.
func BenchmarkConnect(b *testing.B) {
	for _, row := range []string{"bare", "executed", "replay"} {
		b.Run("unary/"+row, func(b *testing.B) {
			benchtest.ForCallers(b, func(b *testing.B, callers int) {
				benchUnary(b, row, callers)
			})
		})
	}
	for _, row := range []string{"bare", "executed", "replayed"} {
		b.Run("stream/"+row, func(b *testing.B) { benchStream(b, row) })
	}
}

// benchServer serves the test services with opts on a new httptest server
// and returns their clients, over a transport that keeps a connection per
// caller.
func benchServer(b *testing.B, unary connecttest.Handler, streams testingv1connect.StreamServiceHandler, opts ...connect.HandlerOption) (testingv1connect.TestServiceClient, testingv1connect.StreamServiceClient) {
	mux := http.NewServeMux()
	mux.Handle(testingv1connect.NewTestServiceHandler(&connecttest.TestService{Handler: unary}, opts...))
	mux.Handle(testingv1connect.NewStreamServiceHandler(streams, opts...))
	hs := httptest.NewServer(mux)
	b.Cleanup(hs.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: slices.Max(benchtest.Callers)}
	b.Cleanup(tr.CloseIdleConnections) // before hs.Close: cleanups run last first
	hc := &http.Client{Transport: tr}
	return testingv1connect.NewTestServiceClient(hc, hs.URL), testingv1connect.NewStreamServiceClient(hc, hs.URL)
}

// interceptorFor returns the handler options of a row: none for bare, the
// handler interceptor over a new memory store otherwise.
func interceptorFor(b *testing.B, row string) []connect.HandlerOption {
	if row == "bare" {
		return nil
	}
	mem := memorystore.New()
	b.Cleanup(func() { _ = mem.Close() })
	return []connect.HandlerOption{connect.WithInterceptors(connectidempotency.NewInterceptor(idempotency.NewServer(mem)))}
}

// benchUnary makes b.N calls of Do from callers goroutines; it fails an
// answer that is not marked replayed exactly when it should be.
func benchUnary(b *testing.B, row string, callers int) {
	handler := func(_ context.Context, _ string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
		return connect.NewResponse(&testingv1.DoResponse{Payload: req.Msg.GetPayload(), Amount: req.Msg.GetAmount()}), nil
	}
	client, _ := benchServer(b, handler, &connecttest.Streams{}, interceptorFor(b, row)...)
	ctx := context.Background()
	keyOf := benchtest.Keys(row == "replay")
	call := func(i int64) (bool, error) {
		req := connect.NewRequest(&testingv1.DoRequest{Payload: "benchmark", Amount: 4200})
		req.Header().Set(idempotency.MetadataKey, keyOf(i))
		resp, err := client.Do(ctx, req)
		if err != nil {
			return false, err
		}
		return connectidempotency.Replayed(resp.Header()), nil
	}
	if row == "replay" {
		if replayed, err := call(0); err != nil || replayed {
			b.Fatalf("first call: replayed %v, %v", replayed, err)
		}
	}
	runtime.GC() // no garbage of the rows before this one
	b.ResetTimer()
	benchtest.Parallel(b, callers, func(i int64) {
		if replayed, err := call(i); err != nil || replayed != (row == "replay") {
			b.Errorf("replayed %v, %v; want replayed %v", replayed, err, row == "replay")
		}
	})
}

// benchStream makes b.N calls of Download, each a stream of 100 messages
// of 64 bytes; it fails a row whose handler ran other than once per call
// (bare, executed) or once in all (replayed).
func benchStream(b *testing.B, row string) {
	var svc sized
	_, client := benchServer(b, nil, &svc, interceptorFor(b, row)...)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		req := connect.NewRequest(&testingv1.DoRequest{Amount: streamMessages})
		req.Header().Set(idempotency.MetadataKey, "same")
		if row == "executed" {
			req.Header().Set(idempotency.MetadataKey, strconv.Itoa(i))
		}
		i++
		stream, err := client.Download(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for stream.Receive() {
			n++
		}
		if err := stream.Err(); err != nil || n != streamMessages {
			b.Fatalf("%d messages, %v; want %d", n, err, streamMessages)
		}
		_ = stream.Close()
	}
	b.ReportMetric(float64(b.N*streamMessages)/b.Elapsed().Seconds(), "msgs/s")
	want := int64(b.N)
	if row == "replayed" {
		want = 1
	}
	if got := svc.runs.Load(); got != want {
		b.Fatalf("the handler ran %d times for %d calls, want %d", got, b.N, want)
	}
}

// sized is a StreamService whose Download sends Amount messages of 64
// bytes.
type sized struct {
	connecttest.Streams
	runs atomic.Int64
}

func (s *sized) Download(_ context.Context, req *connect.Request[testingv1.DoRequest], stream *connect.ServerStream[testingv1.DoResponse]) error {
	s.runs.Add(1)
	for i := range req.Msg.GetAmount() {
		msg := &testingv1.DoResponse{Payload: fmt.Sprintf("%063d", i)}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return nil
}
