package idempotency_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// TestHostileKeys sends keys at and over the length limit, with control
// characters and with non-ASCII bytes, straight to the interceptor.
func TestHostileKeys(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		key  string
		ok   bool
	}{
		{"255 bytes", strings.Repeat("k", idempotency.MaxKeyLen), true},
		{"256 bytes", strings.Repeat("k", idempotency.MaxKeyLen+1), false},
		{"64 KiB", strings.Repeat("k", 64<<10), false},
		{"empty", "", false},
		{"printable edges", "!~", true},
		{"NUL", "a\x00b", false},
		{"SOH", "\x01", false},
		{"tab", "a\tb", false},
		{"CRLF injection", "a\r\nx-admin: true", false},
		{"space", "key with space", false},
		{"DEL", "a\x7f", false},
		{"UTF-8", "ключ-1", false},
		{"emoji", "key-\U0001F511", false},
		{"invalid UTF-8", "\xff\xfe", false},
		{"255 bytes ending in non-ASCII", strings.Repeat("k", idempotency.MaxKeyLen-2) + "é", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDirectServer(t)
			resp, err := d.Call(t.Context(), metadata.MD{idempotency.MetadataKey: {tc.key}}, &testingv1.DoRequest{Payload: "p"})
			if !tc.ok {
				d.WantRefusedKey(t, err, tc.key)
				return
			}
			if err != nil || resp.(*testingv1.DoResponse).GetExecution() != 1 {
				t.Fatalf("accepted key: %v, %v; want an execution", resp, err)
			}
			// and a replay, under the same key
			if _, err := d.Call(t.Context(), metadata.MD{idempotency.MetadataKey: {tc.key}}, &testingv1.DoRequest{Payload: "p"}); err != nil || d.Ran.Load() != 1 {
				t.Fatalf("replay: %v, ran %d times; want 1", err, d.Ran.Load())
			}
		})
	}
}

// TestHostileManyKeys: a request carrying the key metadata more than once,
// up to thousands of times, is refused before the store is touched, both
// straight to the interceptor and over gRPC.
func TestHostileManyKeys(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 100, 10_000} {
		t.Run(fmt.Sprintf("%d keys direct", n), func(t *testing.T) {
			t.Parallel()
			d := newDirectServer(t)
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("k-%d", i%2) // duplicates too
			}
			_, err := d.Call(t.Context(), metadata.MD{idempotency.MetadataKey: keys}, &testingv1.DoRequest{})
			d.WantRefusedKey(t, err, "")
		})
	}
	t.Run("1000 keys over gRPC", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		ctx := t.Context()
		for i := range 1000 {
			ctx = metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, fmt.Sprintf("key-%d", i))
		}
		_, err := f.Client.Do(ctx, &testingv1.DoRequest{})
		wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyInvalid.Reason)
		if n := f.Service.Executions(); n != 0 || len(f.Faults.Calls()) != 0 {
			t.Fatalf("handler ran %d times, store calls %v; want none", n, f.Faults.Calls())
		}
	})
}

// TestHostileHugeResponse: responses over WithMaxResponseBytes are
// returned once and never run again, even under a burst of concurrent
// retries; a response exactly at the limit is retained and replayed.
func TestHostileHugeResponse(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	// A blob whose encoded response is exactly limit bytes (the test
	// service numbers the execution in the response too).
	size := func(blob int) int { return proto.Size(&testingv1.DoResponse{Blob: make([]byte, blob), Execution: 1}) }
	atLimit := limit
	for size(atLimit) > limit {
		atLimit--
	}
	if size(atLimit) != limit {
		t.Fatalf("no blob size encodes to exactly %d bytes", limit)
	}
	cases := []struct {
		name     string
		blob     int
		retained bool
	}{
		{"at the limit", atLimit, true},
		{"one byte over", atLimit + 1, false},
		{"1 MiB", 1 << 20, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				return &testingv1.DoResponse{Blob: make([]byte, tc.blob)}, nil
			}, idempotency.WithMaxResponseBytes(limit))
			ctx := withKey(t.Context(), "k-huge")
			resp, err := f.Client.Do(ctx, &testingv1.DoRequest{})
			if err != nil || len(resp.GetBlob()) != tc.blob {
				t.Fatalf("first call: %v, %d bytes; want the whole response", err, len(resp.GetBlob()))
			}
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := f.Client.Do(ctx, &testingv1.DoRequest{})
					switch {
					case tc.retained && (err != nil || len(resp.GetBlob()) != tc.blob):
						errs <- fmt.Errorf("retry: %v, %d bytes; want the replay", err, len(resp.GetBlob()))
					case !tc.retained && (status.Code(err) != codes.FailedPrecondition || clientReason(err) != idempotency.ErrResponseNotRetained.Reason):
						errs <- fmt.Errorf("retry: %v; want FAILED_PRECONDITION %s", err, idempotency.ErrResponseNotRetained.Reason)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if n := f.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.retained]; f.Events.Count(idempotency.DecisionNotRetained) != want {
				t.Fatalf("observer saw %d not_retained, want %d", f.Events.Count(idempotency.DecisionNotRetained), want)
			}
		})
	}
}

// TestHostileKeyFlood floods a memory store bounded by WithMaxEntries
// with distinct keys while some claims are in flight: the store never holds
// more than its bound, refusals are RESOURCE_EXHAUSTED
// IDEMPOTENCY_STORE_FULL, and the in-flight claims are never evicted: they
// complete and replay afterwards.
func TestHostileKeyFlood(t *testing.T) {
	t.Parallel()
	const bound, held, flood, flooders = 64, 8, 4000, 16
	mem := memStore(t, memorystore.WithMaxEntries(bound))
	started, release := make(chan struct{}, held), make(chan struct{})
	handler := func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if strings.HasPrefix(req.GetPayload(), "held") {
			started <- struct{}{}
			<-release
		}
		return testserver.Echo(ctx, m, req)
	}
	ev := &events{}
	srv := testserver.New(t, &testserver.Service{Handler: handler}, grpc.ChainUnaryInterceptor(
		idempotency.UnaryServerInterceptor(mem, idempotency.WithObserver(ev))))
	client := srv.Client(t)
	ctx := t.Context()

	heldDone := make(chan error, held)
	for i := range held {
		go func() {
			key := fmt.Sprintf("held-%d", i)
			_, err := client.Do(withKey(ctx, key), &testingv1.DoRequest{Payload: key})
			heldDone <- err
		}()
	}
	for range held {
		<-started
	}

	var executed, full, maxLen atomic.Int64
	var other atomic.Value
	var next atomic.Int64
	var wg sync.WaitGroup
	for range flooders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= flood; i = next.Add(1) {
				key := fmt.Sprintf("flood-%d", i)
				_, err := client.Do(withKey(ctx, key), &testingv1.DoRequest{Payload: key})
				switch {
				case err == nil:
					executed.Add(1)
				case status.Code(err) == codes.ResourceExhausted && clientReason(err) == idempotency.ErrStoreFull.Reason:
					full.Add(1)
				default:
					other.CompareAndSwap(nil, err)
				}
				for l := int64(mem.Len()); ; {
					m := maxLen.Load()
					if l <= m || maxLen.CompareAndSwap(m, l) {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := other.Load(); err != nil {
		t.Fatalf("a flood call failed with %v, want success or RESOURCE_EXHAUSTED %s", err, idempotency.ErrStoreFull.Reason)
	}
	t.Logf("flood of %d keys against a store bounded to %d with %d held: %d executed, %d refused as full, largest Len %d",
		flood, bound, held, executed.Load(), full.Load(), maxLen.Load())
	if maxLen.Load() > bound || mem.Len() > bound {
		t.Fatalf("store held %d entries (now %d), bound %d", maxLen.Load(), mem.Len(), bound)
	}
	if executed.Load() != bound-held || full.Load() != flood-(bound-held) {
		t.Fatalf("%d executed, %d refused; want %d and %d: the store fills up and stays full", executed.Load(), full.Load(), bound-held, flood-(bound-held))
	}
	if n := ev.Count(idempotency.DecisionStoreFull); int64(n) != full.Load() {
		t.Fatalf("observer saw %d store_full, want %d", n, full.Load())
	}

	close(release)
	for range held {
		if err := <-heldDone; err != nil {
			t.Fatalf("a held call failed after the flood: %v", err)
		}
	}
	for i := range held {
		key := fmt.Sprintf("held-%d", i)
		var header metadata.MD
		if _, err := client.Do(withKey(ctx, key), &testingv1.DoRequest{Payload: key}, grpc.Header(&header)); err != nil || len(header.Get(idempotency.ReplayedKey)) != 1 {
			t.Fatalf("replay of %s in a full store: %v, header %v; want a replay", key, err, header)
		}
	}
	if n := srv.Service.Executions(); n != bound {
		t.Fatalf("handler ran %d times, want %d (one per stored key)", n, bound)
	}
}
