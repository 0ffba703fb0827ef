package connectidempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// A method served by grpc-go and by connect-go over one store (a service
// in the middle of a migration) has one set of keys: a call answered by
// one server is replayed by the other, with the same message and header,
// unary or server-streaming, each way.
func TestSharedWithGRPC(t *testing.T) {
	t.Parallel()
	mem := memorystore.New()
	t.Cleanup(func() { _ = mem.Close() })

	gsrv := idempotency.NewServer(mem)
	gstreams := &streamtest.Streams{}
	gs := testserver.NewWith(t, &testserver.Service{Handler: func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-charge", "grpc"))
		return &testingv1.DoResponse{Payload: "grpc " + req.GetPayload()}, nil
	}}, func(r grpc.ServiceRegistrar) { testingv1.RegisterStreamServiceServer(r, gstreams) },
		grpc.ChainUnaryInterceptor(gsrv.UnaryServerInterceptor()), grpc.ChainStreamInterceptor(gsrv.StreamServerInterceptor()))
	gcc := gs.Dial(t)
	gunary, gstream := testingv1.NewTestServiceClient(gcc), testingv1.NewStreamServiceClient(gcc)

	cstreams := &connecttest.Streams{}
	r := newRig(t, connecttest.Protocols[0], setup{srv: idempotency.NewServer(mem), streams: cstreams,
		handler: func(_ context.Context, _ string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
			resp := connect.NewResponse(&testingv1.DoResponse{Payload: "connect " + req.Msg.GetPayload()})
			resp.Header().Set("X-Charge", "connect")
			return resp, nil
		}})

	grpcUnary := func(key string) (*testingv1.DoResponse, metadata.MD, bool) {
		var header, trailer metadata.MD
		ctx := metadata.AppendToOutgoingContext(t.Context(), idempotency.MetadataKey, key)
		resp, err := gunary.Do(ctx, &testingv1.DoRequest{Payload: "pay"}, grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		return resp, header, idempotency.Replayed(header, trailer)
	}
	connectUnary := func(key string) *connect.Response[testingv1.DoResponse] {
		resp, err := r.unary.Do(t.Context(), request("pay", key))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	t.Run("unary/grpc-go first", func(t *testing.T) {
		live, header, _ := grpcUnary("u1")
		again := connectUnary("u1")
		if !connectidempotency.Replayed(again.Header()) || !bytes.Equal(marshal(t, live), marshal(t, again.Msg)) || again.Header().Get("X-Charge") != header.Get("x-charge")[0] {
			t.Fatalf("connect-go answered %v %v, want the replay of grpc-go's %v %v", again.Msg, again.Header(), live, header)
		}
	})
	t.Run("unary/connect-go first", func(t *testing.T) {
		live := connectUnary("u2")
		again, header, replayed := grpcUnary("u2")
		if !replayed || !bytes.Equal(marshal(t, live.Msg), marshal(t, again)) || header.Get("x-charge")[0] != live.Header().Get("X-Charge") {
			t.Fatalf("grpc-go answered %v %v, want the replay of connect-go's %v %v", again, header, live.Msg, live.Header())
		}
	})

	grpcDownload := func(key string) ([][]byte, bool) {
		ctx := metadata.AppendToOutgoingContext(t.Context(), idempotency.MetadataKey, key)
		stream, err := gstream.Download(ctx, &testingv1.DoRequest{Payload: "dl", Amount: 3})
		if err != nil {
			t.Fatal(err)
		}
		var msgs [][]byte
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				header, _ := stream.Header()
				return msgs, idempotency.Replayed(header, stream.Trailer())
			}
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, marshal(t, m))
		}
	}
	sameMsgs := func(a, b [][]byte) bool {
		return len(a) == 3 && len(b) == len(a) && bytes.Equal(bytes.Join(a, nil), bytes.Join(b, nil))
	}
	t.Run("stream/grpc-go first", func(t *testing.T) {
		live, _ := grpcDownload("s1")
		again := download(t.Context(), t, r, "s1", 3)
		if again.err != nil || !connectidempotency.Replayed(again.header) || !sameMsgs(live, again.msgs) {
			t.Fatalf("connect-go answered %d messages (%v), replayed %v; want grpc-go's 3", len(again.msgs), again.err, connectidempotency.Replayed(again.header))
		}
	})
	t.Run("stream/connect-go first", func(t *testing.T) {
		live := download(t.Context(), t, r, "s2", 3)
		again, replayed := grpcDownload("s2")
		if live.err != nil || !replayed || !sameMsgs(live.msgs, again) {
			t.Fatalf("grpc-go answered %d messages, replayed %v; want connect-go's 3", len(again), replayed)
		}
	})
	if gstreams.Executions() != 1 || cstreams.Executions() != 1 {
		t.Fatalf("Download ran %d times on grpc-go and %d on connect-go, want once each", gstreams.Executions(), cstreams.Executions())
	}
}
