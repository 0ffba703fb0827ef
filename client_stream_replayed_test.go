package idempotency_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

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
