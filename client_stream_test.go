package idempotency_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultproxy"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/streamtest"
)

// streamRig is the StreamService over TCP behind a fault proxy, with the
// server's interceptors over a memory store (waiting for in-flight
// originals) and the client's stream interceptor, whose retries it counts.
type streamRig struct {
	svc     *streamtest.Streams
	events  *events
	proxy   *faultproxy.Proxy
	client  testingv1.StreamServiceClient
	retries atomic.Int64
}

func newStreamRig(t *testing.T, clientOpts ...idempotency.ClientOption) *streamRig {
	t.Helper()
	r := &streamRig{svc: &streamtest.Streams{}, events: &events{}}
	s := idempotency.NewServer(memStore(t), idempotency.WithObserver(r.events), idempotency.WithWaitForInFlight(time.Minute))
	clientOpts = append([]idempotency.ClientOption{
		idempotency.WithMaxAttempts(20),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 10 * time.Millisecond }),
		idempotency.WithOnRetry(func(context.Context, int, error) { r.retries.Add(1) }),
	}, clientOpts...)
	cc, proxy := streamtest.Proxied(t, r.svc, s, grpc.WithChainStreamInterceptor(idempotency.StreamClientInterceptor(clientOpts...)))
	r.proxy, r.client = proxy, testingv1.NewStreamServiceClient(cc)
	return r
}

// wantSequence fails the test unless msgs are messages 0 to n-1 of one
// download, each once and in order.
func wantSequence(t *testing.T, msgs []*testingv1.DoResponse, n int) {
	t.Helper()
	got := make([]int64, len(msgs))
	for i, m := range msgs {
		got[i] = m.GetAmount()
	}
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("received messages %v, want %v", got, want)
	}
}

// TestStreamClientResumesAfterCut: a server stream whose connection is cut
// after the caller received k messages is retried with the same key and
// resumed after them: the caller gets every message once, in order, from
// the one execution, whether the cut comes while the handler runs (the
// retry waits for it) or after it finished (the retry gets the stored
// stream). Header is the first attempt's.
func TestStreamClientResumesAfterCut(t *testing.T) {
	t.Parallel()
	for _, finished := range []bool{false, true} {
		t.Run(map[bool]string{false: "WhileRunning", true: "AfterFinishing"}[finished], func(t *testing.T) {
			t.Parallel()
			const n, k = 8, 3
			r := newStreamRig(t)
			atK, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			r.svc.BeforeSend = func(_ context.Context, i int) {
				if i == k {
					once.Do(func() { close(atK) })
					<-release
				}
			}
			stream, err := r.client.Download(t.Context(), &testingv1.DoRequest{Payload: "d", Amount: n}, grpc.WaitForReady(true))
			if err != nil {
				t.Fatal(err)
			}
			var got []*testingv1.DoResponse
			for range k {
				m, err := stream.Recv()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, m)
			}
			<-atK
			if finished {
				r.proxy.Stall() // the rest is sent but never arrives
				close(release)
				r.events.Wait(t, idempotency.DecisionExecuted, 1)
				r.proxy.CutAll()
				r.proxy.Resume()
			} else {
				r.proxy.CutAll()
				close(release)
			}
			for {
				m, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("after %d messages: %v", len(got), err)
				}
				got = append(got, m)
			}
			wantSequence(t, got, n)
			if e := r.svc.Executions(); e != 1 || r.retries.Load() == 0 {
				t.Fatalf("%d executions and %d retries, want one execution and a retry", e, r.retries.Load())
			}
			for _, m := range got {
				if m.GetExecution() != 1 {
					t.Fatalf("message %d from execution %d", m.GetAmount(), m.GetExecution())
				}
			}
			if h, err := stream.Header(); err != nil || idempotency.Replayed(h, nil) || !slices.Equal(h.Get("x-execution"), []string{"1"}) {
				t.Fatalf("Header() = %v, %v; want the first attempt's, unmarked", h, err)
			}
			if r.events.Count(idempotency.DecisionReplayed) != 1 {
				t.Fatalf("%d replays, want the retry's", r.events.Count(idempotency.DecisionReplayed))
			}
		})
	}
}

// upload sends one message per amount on Upload, with opts, and closes it.
func upload(ctx context.Context, c testingv1.StreamServiceClient, amounts []int64, opts ...grpc.CallOption) (*testingv1.DoResponse, error) {
	stream, err := c.Upload(ctx, append(opts, grpc.WaitForReady(true))...)
	if err != nil {
		return nil, err
	}
	for _, a := range amounts {
		if err := stream.Send(&testingv1.DoRequest{Payload: "p", Amount: a}); err != nil {
			break // CloseAndRecv says why
		}
	}
	return stream.CloseAndRecv()
}

// TestStreamClientRetriesUpload: a client stream whose answer is cut off
// after its handler ran is retried from the messages the interceptor
// holds: the handler runs once and the caller gets its answer. Past
// WithMaxStreamRetryBuffer it is not retried: the caller gets the cut.
func TestStreamClientRetriesUpload(t *testing.T) {
	t.Parallel()
	for _, bound := range []int{defaultMaxStreamRetryBuffer, 20} {
		t.Run(map[bool]string{true: "Held", false: "PastTheBound"}[bound > 20], func(t *testing.T) {
			t.Parallel()
			r := newStreamRig(t, idempotency.WithMaxStreamRetryBuffer(bound))
			r.svc.BeforeAnswer = func(context.Context) {
				if r.svc.Executions() == 1 {
					r.proxy.CutAll() // the handler ran; its answer is lost
				}
			}
			resp, err := upload(t.Context(), r.client, []int64{1, 2, 3, 4}) // 4 messages of 9 bytes with their frames
			if e := r.svc.Executions(); e != 1 {
				t.Fatalf("the handler ran %d times, want once", e)
			}
			if bound > 20 {
				if err != nil || resp.GetAmount() != 10 || resp.GetPayload() != "p+p+p+p" || r.retries.Load() == 0 {
					t.Fatalf("upload: %v, %v after %d retries; want the sum of the one execution", resp, err, r.retries.Load())
				}
				return
			}
			if status.Code(err) != codes.Unavailable || r.retries.Load() != 0 {
				t.Fatalf("upload past the bound: %v after %d retries; want the cut, not retried", err, r.retries.Load())
			}
		})
	}
}

// TestStreamClientKeys: a keyed streaming call carries one key: its first
// request's key_field, else a fresh one per call; a key that disagrees
// with the field fails the call before any attempt; a bidirectional call
// gets no key. The server has no idempotency interceptor: the handler
// sees what the client sent.
func TestStreamClientKeys(t *testing.T) {
	t.Parallel()
	svc := &streamtest.Streams{}
	cc, _ := streamtest.Proxied(t, svc, nil, grpc.WithChainStreamInterceptor(idempotency.StreamClientInterceptor()))
	c := testingv1.NewStreamServiceClient(cc)
	ctx := t.Context()
	for _, req := range []*testingv1.DoRequest{{Amount: 1, RequestId: "down"}, {Amount: 1}, {Amount: 1}} {
		if _, _, err := download(ctx, c, req); err != nil {
			t.Fatal(err)
		}
	}
	up, err := c.Upload(ctx)
	if err == nil {
		_ = up.Send(&testingv1.DoRequest{RequestId: "up"})
		_ = up.Send(&testingv1.DoRequest{RequestId: "ignored"})
		_, err = up.CloseAndRecv()
	}
	if err != nil {
		t.Fatal(err)
	}
	chat, err := c.Chat(ctx)
	if err == nil {
		_ = chat.Send(&testingv1.DoRequest{Payload: "hi"})
		_, err = chat.Recv()
		_ = chat.CloseSend()
	}
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = download(ctx, c, &testingv1.DoRequest{Amount: 1, RequestId: "a"}, idempotency.WithKey("b"))
	wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyInvalid.Reason)
	keys := svc.Keys()
	if len(keys) != 5 {
		t.Fatalf("%d executions, want 5: %q", len(keys), keys)
	}
	one := func(i int) string {
		if len(keys[i]) != 1 {
			t.Fatalf("execution %d saw keys %q, want one", i+1, keys[i])
		}
		return keys[i][0]
	}
	if one(0) != "down" || one(1) == one(2) || one(3) != "up" || len(keys[4]) != 0 {
		t.Fatalf("keys seen %q; want down, two fresh ones, up, none for the bidirectional call", keys)
	}
}
