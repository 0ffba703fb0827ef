package idempotency_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
)

// The stream benchmarks send streams of streamMessages messages of
// streamMessageSize bytes.
const streamMessages, streamMessageSize = 100, 64

// BenchmarkStream compares a bare server stream of 100 messages of 64
// bytes over bufconn (no interceptor) with the same stream executed under a
// fresh key (each message recorded, the outcome stored in a memory store)
// and replayed from the store. msgs/s counts the messages the caller
// received.
func BenchmarkStream(b *testing.B) {
	req := streamtest.OutputRequest(streamMessages, streamMessageSize)
	benchStreams(b, func(ctx context.Context, client testgrpc.TestServiceClient) error {
		a := streamtest.Output(ctx, client, req)
		if a.Err == nil && len(a.Messages) != streamMessages {
			return fmt.Errorf("%d messages, want %d", len(a.Messages), streamMessages)
		}
		return a.Err
	})
}

// BenchmarkClientStream compares a bare client stream of 100 messages of
// 64 bytes over bufconn (no interceptor) with the same stream executed
// under a fresh key (the messages held and fingerprinted, the handler run,
// the response stored in a memory store) and replayed from the store.
// msgs/s counts the messages the caller sent.
func BenchmarkClientStream(b *testing.B) {
	bodies := make([][]byte, streamMessages)
	for i := range bodies {
		bodies[i] = make([]byte, streamMessageSize)
	}
	benchStreams(b, func(ctx context.Context, client testgrpc.TestServiceClient) error {
		resp, _, err := streamtest.Input(ctx, client, bodies...)
		if err == nil && resp.GetAggregatedPayloadSize() != streamMessages*streamMessageSize {
			return fmt.Errorf("aggregated %d bytes", resp.GetAggregatedPayloadSize())
		}
		return err
	})
}

// benchStreams runs one stream call per iteration in three rows: bare (no
// interceptor), executed (a new key every call) and replayed (one key),
// reports msgs/s, and fails a row whose handler ran other than once per
// call (bare, executed) or once in all (replayed).
func benchStreams(b *testing.B, call func(context.Context, testgrpc.TestServiceClient) error) {
	for _, row := range []struct {
		name string
		key  func(i int) string // "": no interceptor
	}{
		{name: "bare", key: func(int) string { return "" }},
		{name: "executed", key: strconv.Itoa},
		{name: "replayed", key: func(int) string { return "same" }},
	} {
		b.Run(row.name, func(b *testing.B) {
			var s *idempotency.Server
			if row.key(0) != "" {
				s = idempotency.NewServer(memStore(b), streamtest.Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired})...)
			}
			svc := &streamtest.Service{}
			client := streamtest.Start(b, svc, s)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ctx := context.Background()
				if k := row.key(i); k != "" {
					ctx = withKey(ctx, k)
				}
				i++
				if err := call(ctx, client); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*streamMessages)/b.Elapsed().Seconds(), "msgs/s")
			want := int64(b.N)
			if row.name == "replayed" {
				want = 1
			}
			if svc.Executions() != want {
				b.Fatalf("the handler ran %d times in %d calls, want %d", svc.Executions(), b.N, want)
			}
		})
	}
}
