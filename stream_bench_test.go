package idempotency_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/streamtest"
)

// BenchmarkStream compares a bare server stream of 100 messages of 64
// bytes over bufconn (no interceptor) with the same stream executed under a
// fresh key (each message recorded, the outcome stored in a memory store)
// and replayed from the store. msgs/s counts the messages the caller
// received.
func BenchmarkStream(b *testing.B) {
	const n, size = 100, 64
	cases := []struct {
		name string
		key  func(i int) string // "": no interceptor
	}{
		{name: "bare", key: func(int) string { return "" }},
		{name: "executed", key: strconv.Itoa},
		{name: "replayed", key: func(int) string { return "same" }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var s *idempotency.Server
			if c.key(0) != "" {
				s = idempotency.NewServer(memStore(b), streamtest.Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired})...)
			}
			svc := &streamtest.Service{}
			client := streamtest.Start(b, svc, s)
			req := streamtest.OutputRequest(n, size)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ctx := context.Background()
				if k := c.key(i); k != "" {
					ctx = withKey(ctx, k)
				}
				i++
				if a := streamtest.Output(ctx, client, req); a.Err != nil || len(a.Messages) != n {
					b.Fatalf("%d messages, %v", len(a.Messages), a.Err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
			if want := executions(c.name, b.N); svc.Executions() != want {
				b.Fatalf("the handler ran %d times in %d calls, want %d", svc.Executions(), b.N, want)
			}
		})
	}
}

// BenchmarkClientStream compares a bare client stream of 100 messages of
// 64 bytes over bufconn (no interceptor) with the same stream executed
// under a fresh key (the messages held and fingerprinted, the handler run,
// the response stored in a memory store) and replayed from the store.
// msgs/s counts the messages the caller sent.
func BenchmarkClientStream(b *testing.B) {
	const n, size = 100, 64
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = make([]byte, size)
	}
	cases := []struct {
		name string
		key  func(i int) string // "": no interceptor
	}{
		{name: "bare", key: func(int) string { return "" }},
		{name: "executed", key: strconv.Itoa},
		{name: "replayed", key: func(int) string { return "same" }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var s *idempotency.Server
			if c.key(0) != "" {
				s = idempotency.NewServer(memStore(b), streamtest.Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired})...)
			}
			svc := &streamtest.Service{}
			client := streamtest.Start(b, svc, s)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ctx := context.Background()
				if k := c.key(i); k != "" {
					ctx = withKey(ctx, k)
				}
				i++
				resp, _, err := streamtest.Input(ctx, client, bodies...)
				if err != nil || resp.GetAggregatedPayloadSize() != n*size {
					b.Fatalf("aggregated %d bytes, %v", resp.GetAggregatedPayloadSize(), err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
			if want := executions(c.name, b.N); svc.Executions() != want {
				b.Fatalf("the handler ran %d times in %d calls, want %d", svc.Executions(), b.N, want)
			}
		})
	}
}

// executions is how many times a stream benchmark's handler runs in n
// calls: once for the replayed row (its first call), n for the others.
func executions(row string, n int) int64 {
	if row == "replayed" {
		return 1
	}
	return int64(n)
}
