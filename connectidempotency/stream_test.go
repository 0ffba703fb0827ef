package connectidempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// streamAnswer is what a caller got from a server stream.
type streamAnswer struct {
	msgs            [][]byte // each message, encoded
	header, trailer http.Header
	err             error
}

// download calls Download with key and the header pairs kv, and reads the
// whole stream, or until stop returns true for message i (from 0), then
// cancels.
func download(ctx context.Context, t *testing.T, r *rig, key string, amount int64, kv ...string) streamAnswer {
	t.Helper()
	req := connect.NewRequest(&testingv1.DoRequest{Payload: "dl", Amount: amount})
	if key != "" {
		req.Header().Set(idempotency.MetadataKey, key)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header().Set(kv[i], kv[i+1])
	}
	stream, err := r.streams.Download(ctx, req)
	if err != nil {
		return streamAnswer{err: err}
	}
	defer stream.Close()
	var a streamAnswer
	for stream.Receive() {
		a.msgs = append(a.msgs, marshal(t, stream.Msg()))
	}
	a.err, a.header, a.trailer = stream.Err(), stream.ResponseHeader(), stream.ResponseTrailer()
	return a
}

// A retry of a server stream gets the same messages in order, the header
// and trailer the handler set, and its final status with its details,
// with the replay marker in the header (and in the trailer of an error),
// over every protocol; the handler runs once per key.
func TestStreamReplayByteForByte(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		streams := &connecttest.Streams{End: func(req *testingv1.DoRequest) error {
			if req.GetPayload() != "dl" || req.GetAmount() != 2 {
				return nil
			}
			ce := connect.NewError(connect.CodeFailedPrecondition, errors.New("partial"))
			ce.Meta().Set("X-Reason", "quota")
			return ce
		}}
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, streams: streams})
		w := r.recordWire(t, p)
		for _, amount := range []int64{3, 2} {
			key := fmt.Sprintf("k-%d", amount)
			live := download(t.Context(), t, r, key, amount)
			again := download(t.Context(), t, r, key, amount)
			if len(live.msgs) != int(amount) || len(again.msgs) != len(live.msgs) {
				t.Fatalf("amount %d: live %d messages, retry %d", amount, len(live.msgs), len(again.msgs))
			}
			for i := range live.msgs {
				if !bytes.Equal(live.msgs[i], again.msgs[i]) {
					t.Fatalf("message %d: replayed %x, live %x", i, again.msgs[i], live.msgs[i])
				}
			}
			if again.header.Get("X-Execution") != "1" && amount == 3 || !connectidempotency.Replayed(again.header) || connectidempotency.Replayed(live.header) {
				t.Fatalf("amount %d: header: replayed %v, live %v", amount, again.header, live.header)
			}
			if got, want := again.trailer.Get("X-Sent"), live.trailer.Get("X-Sent"); got != want || want == "" {
				t.Fatalf("amount %d: trailer X-Sent: replayed %q, live %q", amount, got, want)
			}
			if amount == 3 {
				if live.err != nil || again.err != nil {
					t.Fatalf("errors: live %v, retry %v", live.err, again.err)
				}
				got := w.answers()
				sameWire(t, got[len(got)-2], got[len(got)-1])
				continue
			}
			le := wantCode(t, live.err, connect.CodeFailedPrecondition, "")
			ae := wantCode(t, again.err, connect.CodeFailedPrecondition, "")
			if !bytes.Equal(connecttest.StatusBytes(le), connecttest.StatusBytes(ae)) {
				t.Fatalf("status: replayed %v, live %v", again.err, live.err)
			}
			if got, want := ae.Meta().Values("X-Reason"), le.Meta().Values("X-Reason"); !equal(got, want) || len(want) != 1 {
				t.Fatalf("error metadata: replayed %q, live %q", got, want)
			}
			if !connectidempotency.Replayed(again.trailer) || connectidempotency.Replayed(live.trailer) {
				t.Fatalf("trailer marker: replayed %v, live %v", again.trailer, live.trailer)
			}
		}
		if n := streams.Executions(); n != 2 {
			t.Fatalf("Download ran %d times for two keys, want 2", n)
		}
	})
}

// A retry that sends idempotency-resume-after: N gets the stored stream's
// messages after the first N, and its status; an invalid value is
// INVALID_ARGUMENT with IDEMPOTENCY_RESUME_INVALID.
func TestStreamResumeAfter(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		streams := &connecttest.Streams{}
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, streams: streams})
		all := download(t.Context(), t, r, "k", 5)
		if all.err != nil || len(all.msgs) != 5 {
			t.Fatalf("first call: %d messages, %v", len(all.msgs), all.err)
		}
		for _, n := range []int{0, 2, 5, 9} {
			got := download(t.Context(), t, r, "k", 5, idempotency.ResumeAfterKey, fmt.Sprint(n))
			want := all.msgs[min(n, 5):]
			if got.err != nil || len(got.msgs) != len(want) {
				t.Fatalf("resume after %d: %d messages, %v; want %d", n, len(got.msgs), got.err, len(want))
			}
			for i := range want {
				if !bytes.Equal(got.msgs[i], want[i]) {
					t.Fatalf("resume after %d: message %d differs", n, i)
				}
			}
		}
		bad := download(t.Context(), t, r, "k", 5, idempotency.ResumeAfterKey, "-1")
		wantCode(t, bad.err, connect.CodeInvalidArgument, idempotency.ErrResumeInvalid.Reason)
		if n := streams.Executions(); n != 1 {
			t.Fatalf("Download ran %d times, want 1", n)
		}
	})
}

// A caller that leaves mid-stream does not stop the handler, which runs on
// detached: the messages it sends after are recorded, and a retry gets the
// whole stream, replayed.
func TestStreamCallerLeaves(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		left, finished := make(chan struct{}), make(chan error, 1)
		streams := &connecttest.Streams{
			BeforeSend: func(ctx context.Context, i int) {
				if i == 2 {
					<-left
				}
			},
			Finished: func(ctx context.Context, err error) { finished <- err },
		}
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, streams: streams})
		ctx, cancel := context.WithCancel(t.Context())
		req := connect.NewRequest(&testingv1.DoRequest{Payload: "dl", Amount: 5})
		req.Header().Set(idempotency.MetadataKey, "k")
		stream, err := r.streams.Download(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if !stream.Receive() {
				t.Fatalf("message %d: %v", i, stream.Err())
			}
		}
		cancel()
		_ = stream.Close()
		close(left)
		if err := <-finished; err != nil {
			t.Fatalf("the detached handler returned %v", err)
		}
		got := download(t.Context(), t, r, "k", 5)
		if got.err != nil || len(got.msgs) != 5 || !connectidempotency.Replayed(got.header) {
			t.Fatalf("retry: %d messages, %v, replayed %v; want the 5, replayed", len(got.msgs), got.err, connectidempotency.Replayed(got.header))
		}
		if n := streams.Executions(); n != 1 {
			t.Fatalf("Download ran %d times, want 1", n)
		}
	})
}

// A message connect-go refuses for itself (over the handler's
// WithSendMaxBytes) ends the stream with connect-go's error, as grpc-go's
// refusal does: it is not sent or recorded, every later send returns the
// same error, and the caller gets the messages before it and that status,
// whatever the handler returns after. A handler that returns the refusal
// (RESOURCE_EXHAUSTED, not a stored code) releases its key, and a retry
// runs it again; one that goes on and returns OK completes the key with
// that stream, which every retry gets replayed.
func TestStreamSendRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		after string
		runs  int64
	}{{"returns the refusal", 2}, {"goes on", 1}} {
		t.Run(tt.after, func(t *testing.T) {
			t.Parallel()
			forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
				h := &bulky{after: tt.after}
				srv, _ := memServer(t)
				r := newRig(t, p, setup{srv: srv, streamHandler: h, handlerOpts: []connect.HandlerOption{connect.WithSendMaxBytes(256)}})
				live := download(t.Context(), t, r, "k", 3)
				again := download(t.Context(), t, r, "k", 3)
				for _, a := range []streamAnswer{live, again} {
					wantCode(t, a.err, connect.CodeResourceExhausted, "")
					if len(a.msgs) != 1 || !bytes.Equal(a.msgs[0], live.msgs[0]) {
						t.Fatalf("%d messages, want the one before the refusal", len(a.msgs))
					}
				}
				if replayed := tt.runs == 1; connectidempotency.Replayed(again.header) != replayed || connectidempotency.Replayed(again.trailer) != replayed {
					t.Fatalf("retry: header %v, trailer %v; want replayed %v", again.header, again.trailer, replayed)
				}
				laterSends := h.sends()
				for _, err := range laterSends {
					if connect.CodeOf(err) != connect.CodeResourceExhausted {
						t.Fatalf("a send after the refusal returned %v, want the refusal", err)
					}
				}
				if len(laterSends) == 0 && tt.after == "goes on" {
					t.Fatal("the handler sent nothing after the refusal")
				}
				if n := h.Executions(); n != tt.runs {
					t.Fatalf("Download ran %d times, want %d", n, tt.runs)
				}
			})
		})
	}
}

// A header the handler sets after its first message does not reach the
// caller (connect-go sends the header with the first message), nor a
// retry.
func TestStreamLateHeader(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		h := &bulky{after: "late header"}
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, streamHandler: h})
		for i, a := range []streamAnswer{download(t.Context(), t, r, "k", 2), download(t.Context(), t, r, "k", 2)} {
			if a.err != nil || a.header.Get("X-Late") != "" || a.header.Get("X-Early") != "e" {
				t.Fatalf("call %d: %v, header %v; want X-Early and no X-Late", i+1, a.err, a.header)
			}
		}
	})
}

// A keyed client stream's requests are its fingerprint, in order: the
// same stream replays the stored answer, reordered messages are a reused
// key; the key may come from the first request's request_id.
func TestUpload(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		streams := &connecttest.Streams{}
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, streams: streams})
		upload := func(key string, reqs ...*testingv1.DoRequest) (*connect.Response[testingv1.DoResponse], error) {
			stream := r.streams.Upload(t.Context())
			if key != "" {
				stream.RequestHeader().Set(idempotency.MetadataKey, key)
			}
			for _, req := range reqs {
				if err := stream.Send(req); err != nil {
					break
				}
			}
			return stream.CloseAndReceive()
		}
		a, b := &testingv1.DoRequest{Payload: "a", Amount: 1}, &testingv1.DoRequest{Payload: "b", Amount: 2}
		live, err := upload("k", a, b)
		if err != nil {
			t.Fatal(err)
		}
		again, err := upload("k", a, b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(marshal(t, live.Msg), marshal(t, again.Msg)) || !connectidempotency.Replayed(again.Header()) ||
			again.Header().Get("X-Execution") != "1" {
			t.Fatalf("replay %v %v, live %v", again.Msg, again.Header(), live.Msg)
		}
		_, err = upload("k", b, a)
		wantCode(t, err, connect.CodeFailedPrecondition, idempotency.ErrKeyReused.Reason)
		keyed := &testingv1.DoRequest{Payload: "c", RequestId: "rid"}
		for range 2 {
			if _, err := upload("", keyed, a); err != nil {
				t.Fatal(err)
			}
		}
		_, err = upload("", a)
		wantCode(t, err, connect.CodeInvalidArgument, idempotency.ErrKeyMissing.Reason)
		if n := streams.Executions(); n != 2 {
			t.Fatalf("Upload ran %d times, want 2 (once per key)", n)
		}
	})
}

// A bidirectional method with an idempotency option cannot work: its calls
// fail closed, as over grpc-go.
func TestBidiMisconfigured(t *testing.T) {
	t.Parallel()
	for _, p := range []connecttest.Protocol{connecttest.Protocols[1], connecttest.Protocols[2]} {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			streams := &connecttest.Streams{}
			srv, _ := memServer(t)
			r := newRig(t, p, setup{srv: srv, streams: streams})
			stream := r.streams.Chat(t.Context())
			_ = stream.Send(&testingv1.DoRequest{Payload: "hi"})
			_, err := stream.Receive()
			wantCode(t, err, connect.CodeInternal, idempotency.ErrMisconfigured.Reason)
			_ = stream.CloseRequest()
			_ = stream.CloseResponse()
			if n := streams.Executions(); n != 0 {
				t.Fatalf("Chat ran %d times, want 0", n)
			}
		})
	}
}

// bulky is a StreamService whose Download sets the header X-Early and sends
// a small message, then, as after says: sets the header X-Late and sends
// another ("late header"); or sends one of 1 KiB, which a server with
// WithSendMaxBytes(256) refuses, and returns the refusal ("returns the
// refusal") or sends two more and returns nil ("goes on"), keeping what
// those sends returned.
type bulky struct {
	connecttest.Streams
	after string
	runs  atomic.Int64

	mu         sync.Mutex
	laterSends []error
}

func (b *bulky) Download(ctx context.Context, req *connect.Request[testingv1.DoRequest], stream *connect.ServerStream[testingv1.DoResponse]) error {
	b.runs.Add(1)
	stream.ResponseHeader().Set("X-Early", "e")
	if err := stream.Send(&testingv1.DoResponse{Payload: "small"}); err != nil {
		return err
	}
	if b.after == "late header" {
		stream.ResponseHeader().Set("X-Late", "l")
		return stream.Send(&testingv1.DoResponse{Payload: "second"})
	}
	blob := make([]byte, 1024) // incompressible, so that gzip does not bring it under the bound
	for i := range blob {
		blob[i] = byte(i*i*7 + i*13)
	}
	err := stream.Send(&testingv1.DoResponse{Blob: blob})
	if err == nil {
		return errors.New("the big message was sent")
	}
	if b.after == "returns the refusal" {
		return err
	}
	for range 2 {
		err := stream.Send(&testingv1.DoResponse{Payload: "after"})
		b.mu.Lock()
		b.laterSends = append(b.laterSends, err)
		b.mu.Unlock()
	}
	return nil
}

// Executions is how many times Download ran.
func (b *bulky) Executions() int64 { return b.runs.Load() }

func (b *bulky) sends() []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.laterSends)
}
