package idempotency_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
)

// BenchmarkDo compares calling a function directly (bare) with the same
// function run through Do and Once on a memory store, executed (a new key
// every call) and replayed (one key, stored before the timer starts), at 1
// and 64 concurrent callers. Every row builds the same response from the
// same request, so the entry point is the only difference: compare each
// row with bare of the same callers in the same run. Each row has a store
// of its own, new for every b.N tried, so a row's heap holds no records but
// its own.
func BenchmarkDo(b *testing.B) {
	req := &testingv1.DoRequest{Payload: "benchmark", Amount: 4200}
	fn := func(context.Context) (*testingv1.DoResponse, error) {
		return &testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount()}, nil
	}
	do := func(ctx context.Context, s *idempotency.Server, key string) (bool, error) {
		_, replayed, err := idempotency.Do(ctx, s, "bench.Do", key, req, fn)
		return replayed, err
	}
	once := func(ctx context.Context, s *idempotency.Server, key string) (bool, error) {
		ran, err := idempotency.Once(ctx, s, "bench.Once", key, req, func(ctx context.Context) error {
			_, err := fn(ctx)
			return err
		})
		return !ran, err
	}
	b.Run("bare", func(b *testing.B) {
		benchtest.ForCallers(b, func(b *testing.B, callers int) {
			ctx := context.Background()
			benchtest.Parallel(b, callers, func(int64) {
				if _, err := fn(ctx); err != nil {
					b.Error(err)
				}
			})
		})
	})
	for _, entry := range []struct {
		name string
		call func(ctx context.Context, s *idempotency.Server, key string) (replayed bool, err error)
	}{{"do", do}, {"once", once}} {
		for _, replay := range []bool{false, true} {
			name := entry.name + "-executed"
			if replay {
				name = entry.name + "-replay"
			}
			b.Run(name, func(b *testing.B) {
				benchtest.ForCallers(b, func(b *testing.B, callers int) {
					benchEntry(b, callers, replay, entry.call)
				})
			})
		}
	}
}

// benchEntry makes b.N calls of call on a server over a new memory store,
// each with a new key, or with replay one key called once before the timer
// starts; it fails a call that does not replay when it should, or the
// other way round.
func benchEntry(b *testing.B, callers int, replay bool, call func(ctx context.Context, s *idempotency.Server, key string) (bool, error)) {
	s := idempotency.NewServer(memStore(b))
	ctx := context.Background()
	keyOf := benchtest.Keys(replay)
	if replay {
		if replayed, err := call(ctx, s, keyOf(0)); err != nil || replayed {
			b.Fatalf("first call: replayed=%v err=%v", replayed, err)
		}
	}
	runtime.GC() // no garbage of the rows before this one
	b.ResetTimer()
	benchtest.Parallel(b, callers, func(i int64) {
		if replayed, err := call(ctx, s, keyOf(i)); err != nil || replayed != replay {
			b.Errorf("replayed=%v err=%v, want replayed=%v", replayed, err, replay)
		}
	})
}
