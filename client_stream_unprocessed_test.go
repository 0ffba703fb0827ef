package idempotency_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/streamtest"
)

// unprocessed plays grpc-go's part for one attempt of a client stream
// whose transport closed before the server saw it: from its message from
// on, SendMsg answers io.EOF and keeps the message, and the status is
// still OK, so grpc-go keeps the message in its retry buffer; when the
// caller asks for the status (RecvMsg), the attempt sends what it kept,
// the end of the caller's side included if it was given, as grpc-go's
// transparent retry replays its buffer on a new stream. With dies, the
// attempt's RecvMsg fails UNAVAILABLE instead and nothing is replayed: a
// stream that died, which grpc-go does not retry.
type unprocessed struct {
	grpc.ClientStream
	cancel context.CancelFunc
	from   int
	dies   bool

	mu     sync.Mutex
	sent   int
	kept   []any
	closed bool
}

func (u *unprocessed) SendMsg(m any) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sent < u.from {
		u.sent++
		return u.ClientStream.SendMsg(m)
	}
	u.kept = append(u.kept, m)
	return io.EOF
}

func (u *unprocessed) CloseSend() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	if u.sent < u.from {
		return u.ClientStream.CloseSend()
	}
	return nil
}

func (u *unprocessed) RecvMsg(m any) error {
	u.mu.Lock()
	if u.dies {
		u.mu.Unlock()
		u.cancel()
		return status.Error(codes.Unavailable, "the stream died")
	}
	for _, k := range u.kept {
		_ = u.ClientStream.SendMsg(k)
	}
	if u.closed && u.sent >= u.from {
		_ = u.ClientStream.CloseSend()
	}
	u.kept = nil
	u.mu.Unlock()
	return u.ClientStream.RecvMsg(m)
}

// TestStreamClientUnprocessedAttempt: grpc-go answers io.EOF to a message
// sent on a client stream that its transport closed before the server saw
// it, and still retries that stream transparently when the caller asks for
// its status, replaying what the caller gave it. The interceptor gives
// such an attempt every message it holds and the end of the caller's side,
// so what the server receives is the whole request or nothing: never its
// first messages with an end, which would run the handler on a request cut
// short (the retry's attempt, Resent), nor its first messages with no end,
// which would leave the server waiting (the first attempt, Sent).
func TestStreamClientUnprocessedAttempt(t *testing.T) {
	t.Parallel()
	for _, resent := range []bool{false, true} {
		t.Run(map[bool]string{false: "Sent", true: "Resent"}[resent], func(t *testing.T) {
			t.Parallel()
			var attempts []*unprocessed
			if resent {
				attempts = append(attempts, &unprocessed{dies: true})
			}
			attempts = append(attempts, &unprocessed{from: 2})
			var mu sync.Mutex
			attempt := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				mu.Lock()
				defer mu.Unlock()
				if len(attempts) == 0 {
					return streamer(ctx, desc, cc, method, opts...)
				}
				u := attempts[0]
				attempts = attempts[1:]
				ctx, u.cancel = context.WithCancel(ctx)
				cs, err := streamer(ctx, desc, cc, method, opts...)
				u.ClientStream = cs
				return u, err
			}
			svc := &streamtest.Streams{}
			s := idempotency.NewServer(memStore(t))
			cc, _ := streamtest.Proxied(t, svc, s, grpc.WithChainStreamInterceptor(idempotency.StreamClientInterceptor(
				idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 0 })), attempt))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			resp, err := upload(ctx, testingv1.NewStreamServiceClient(cc), []int64{1, 2, 3, 4, 5})
			if err != nil || resp.GetAmount() != 15 || resp.GetPayload() != "p+p+p+p+p" {
				t.Fatalf("upload of 5 messages: %v, %v; want the sum of all 5", resp, err)
			}
			if e := svc.Executions(); e != 1 {
				t.Fatalf("the handler ran %d times, want once", e)
			}
		})
	}
}
