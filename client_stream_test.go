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

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
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

// TestStreamClientCallContext: through StreamClientInterceptor, a server
// stream cut after replayedAt live messages and resumed by a retry is one
// call to its caller. Its Context lives as long as the call, not the
// first attempt: not done after the cut, done once the call has ended, and
// it carries the attempt's values (the peer). The grpc.Header call option
// gets what Header returns, the first attempt's header (live, unmarked),
// not the retry's replayed one.
func TestStreamClientCallContext(t *testing.T) {
	t.Parallel()
	r := newStreamRig(t)
	at, cut := r.cutFirst(t, cutAfterLive)
	var header metadata.MD
	stream, err := r.client.Download(t.Context(), &testingv1.DoRequest{Payload: "d", Amount: replayedLen, RequestId: "k-ctx"},
		grpc.Header(&header), grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	var got []*testingv1.DoResponse
	var callCtx context.Context // Context() once the first message came: code watching it
	for {
		if len(got) == at {
			cut()
		}
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d messages: %v", len(got), err)
		}
		got = append(got, m)
		if callCtx == nil {
			callCtx = stream.Context()
		}
		if err := callCtx.Err(); err != nil {
			t.Fatalf("Context() after message %d: %v; want it live until the call ends", len(got), err)
		}
		if _, ok := peer.FromContext(stream.Context()); !ok {
			t.Fatalf("Context() after message %d carries no peer", len(got))
		}
	}
	wantSequence(t, got, replayedLen)
	if r.retries.Load() == 0 || r.svc.Executions() != 1 {
		t.Fatalf("%d retries, %d executions; want a retry and one execution", r.retries.Load(), r.svc.Executions())
	}
	select {
	case <-callCtx.Done():
	default:
		t.Fatal("Context() not done after the call ended")
	}
	h, err := stream.Header()
	if err != nil || idempotency.Replayed(h, nil) || !slices.Equal(h.Get("x-execution"), []string{"1"}) {
		t.Fatalf("Header() = %v, %v; want the first attempt's, unmarked", h, err)
	}
	if idempotency.Replayed(header, nil) || !slices.Equal(header.Get("x-execution"), h.Get("x-execution")) {
		t.Fatalf("grpc.Header gave %v, Header() %v; want the same", header, h)
	}
}

// Where a replayedCase's first call is cut.
const (
	cutNone         = iota
	cutAfterLive    // after the caller received replayedAt live messages, while the handler runs
	cutBeforeHeader // before anything reached the caller, once the handler finished or before it answered
)

// replayedAt is where cutAfterLive cuts a download of replayedLen messages.
const replayedAt, replayedLen = 3, 6

// TestStreamReplayedInto: ReplayedInto reports whether the answer a
// streaming call got through StreamClientInterceptor was replayed, as
// Replayed of the stream's Header and Trailer says: an executed stream or
// upload is not, a retry with its key is (the header of a stream or a
// response, the trailer of an error); a download whose first attempt lost
// everything and whose retry replays is; a download resumed after a live
// first attempt is not, since its header and its run are the caller's own,
// unless it ends with an error replayed from the store; a bidirectional
// stream, which passes through, is not.
func TestStreamReplayedInto(t *testing.T) {
	t.Parallel()
	stored := func(*testingv1.DoRequest) error { return status.Error(codes.InvalidArgument, "declined") }
	cases := []struct {
		name   string
		method string // "download", "upload" or "chat"
		end    func(*testingv1.DoRequest) error
		cut    int
		fails  bool   // each call ends in an error
		want   []bool // per call, each with the same key
	}{
		{name: "stream executed, then replayed", method: "download", want: []bool{false, true}},
		{name: "stream error executed, then replayed", method: "download", end: stored, fails: true, want: []bool{false, true}},
		{name: "stream lost before its header, the retry replays", method: "download", cut: cutBeforeHeader, want: []bool{true}},
		{name: "stream resumed after a live start", method: "download", cut: cutAfterLive, want: []bool{false, true}},
		{name: "stream resumed after a live start, error replayed", method: "download", end: stored, fails: true, cut: cutAfterLive, want: []bool{true, true}},
		{name: "upload executed, then replayed", method: "upload", want: []bool{false, true}},
		{name: "upload answer lost, the retry replays", method: "upload", cut: cutBeforeHeader, want: []bool{true}},
		// Chat has an idempotency option: the server fails it closed.
		{name: "bidirectional stream", method: "chat", fails: true, want: []bool{false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newStreamRig(t)
			r.svc.End = tc.end
			at, cut := r.cutFirst(t, tc.cut)
			for i, want := range tc.want {
				got := !want // set by the interceptor
				var err error
				switch tc.method {
				case "download":
					err = r.downloadReplayed(t.Context(), at, cut, idempotency.ReplayedInto(&got))
				case "upload":
					_, err = upload(t.Context(), r.client, []int64{1, 2}, idempotency.WithKey("k-into"), idempotency.ReplayedInto(&got))
				case "chat":
					err = chat(t.Context(), r.client, idempotency.ReplayedInto(&got))
				}
				if (err != nil) != tc.fails {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if got != want {
					t.Fatalf("call %d: replayed %v, want %v", i+1, got, want)
				}
				cut = nil
			}
			if n := r.svc.Executions(); n != 1 && tc.method != "chat" {
				t.Fatalf("the handler ran %d times, want once", n)
			}
			if tc.cut != cutNone && r.retries.Load() == 0 {
				t.Fatal("the first call was not retried")
			}
		})
	}
}

// cutFirst sets up the cut of the rig's first execution, and returns the
// function the caller of a download runs before it receives message at.
// cutAfterLive: after replayedAt live messages, the cut comes while the
// handler waits, then the handler goes on. cutBeforeHeader: the proxy holds
// back everything the handler sends, and before its first receive the
// caller waits for the handler to finish, then cuts; an upload's
// connection is cut before its handler answers.
func (r *streamRig) cutFirst(t *testing.T, where int) (at int, cut func()) {
	first := func() bool { return r.svc.Executions() == 1 }
	switch where {
	case cutAfterLive:
		atK, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		r.svc.BeforeSend = func(_ context.Context, i int) {
			if i == replayedAt && first() {
				once.Do(func() { close(atK) })
				<-release
			}
		}
		return replayedAt, func() {
			<-atK
			r.proxy.CutAll()
			close(release)
		}
	case cutBeforeHeader:
		r.svc.BeforeSend = func(_ context.Context, i int) {
			if i == 0 && first() {
				r.proxy.Stall()
			}
		}
		r.svc.BeforeAnswer = func(context.Context) {
			if first() {
				r.proxy.CutAll()
			}
		}
		return 0, func() {
			r.events.Wait(t, idempotency.DecisionExecuted, 1)
			r.proxy.CutAll()
			r.proxy.Resume()
		}
	}
	return 0, nil
}

// downloadReplayed downloads replayedLen messages with key k-into and
// checks that it gets each once, in order; cut, when not nil, runs before
// it receives message at.
func (r *streamRig) downloadReplayed(ctx context.Context, at int, cut func(), opts ...grpc.CallOption) error {
	opts = append(opts, grpc.WaitForReady(true))
	stream, err := r.client.Download(ctx, &testingv1.DoRequest{Payload: "d", Amount: replayedLen, RequestId: "k-into"}, opts...)
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		if i == at && cut != nil {
			cut()
		}
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if m.GetAmount() != int64(i) {
			return status.Errorf(codes.Internal, "message %d is number %d", i, m.GetAmount())
		}
	}
}

// chat sends one message on Chat, receives its echo, and closes.
func chat(ctx context.Context, c testingv1.StreamServiceClient, opts ...grpc.CallOption) error {
	stream, err := c.Chat(ctx, opts...)
	if err != nil {
		return err
	}
	if err := stream.Send(&testingv1.DoRequest{Payload: "hi"}); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

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
