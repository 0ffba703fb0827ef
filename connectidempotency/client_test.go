package connectidempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency"
	"github.com/grpc-idempotency/idempotency/connectidempotency/internal/connecttest"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// clientOpts are the client interceptor's options in these tests: a short
// backoff.
func clientOpts(opts ...idempotency.ClientOption) []connect.ClientOption {
	opts = append([]idempotency.ClientOption{idempotency.WithBackoff(func(context.Context, uint) time.Duration { return time.Millisecond })}, opts...)
	return []connect.ClientOption{connect.WithInterceptors(connectidempotency.NewClientInterceptor(opts...))}
}

// The client interceptor gives a call one key and retries it with that
// key on a retryable answer (UNAVAILABLE here), up to its attempts.
func TestClientRetriesWithOneKey(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		var runs runs
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, clientOpts: clientOpts(), handler: func(ctx context.Context, m string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
			resp, _ := runs.handler(ctx, m, req)
			if resp.Msg.GetExecution() < 3 {
				return nil, connect.NewError(connect.CodeUnavailable, errors.New("flaky"))
			}
			return resp, nil
		}})
		resp, err := r.unary.Do(t.Context(), request("pay", ""))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.GetExecution() != 3 || len(runs.keys) != 3 {
			t.Fatalf("execution %d after %d runs, want the third", resp.Msg.GetExecution(), len(runs.keys))
		}
		if k := runs.keys[0]; k == "" || runs.keys[1] != k || runs.keys[2] != k {
			t.Fatalf("keys %q, want one minted key on every attempt", runs.keys)
		}
	})
}

// A call whose answer is lost (the connection cut while its handler runs)
// is retried with its key and gets the stored answer: the handler runs
// once.
func TestClientLostAnswer(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		var runs runs
		var retries atomic.Int64
		started, release := make(chan struct{}), make(chan struct{})
		srv, _ := memServer(t, idempotency.WithWaitForInFlight(time.Minute))
		onRetry := idempotency.WithOnRetry(func(context.Context, int, error) { retries.Add(1) })
		r := newRig(t, p, setup{srv: srv, proxied: true, clientOpts: clientOpts(onRetry), handler: func(ctx context.Context, m string, req *connect.Request[testingv1.DoRequest]) (*connect.Response[testingv1.DoResponse], error) {
			if runs.count() == 0 {
				close(started)
				<-release
			}
			return runs.handler(ctx, m, req)
		}})
		go func() {
			<-started
			r.Proxy.CutAll()
			close(release)
		}()
		resp, err := r.unary.Do(t.Context(), request("pay", ""))
		if err != nil {
			t.Fatal(err)
		}
		if !connectidempotency.Replayed(resp.Header()) || resp.Msg.GetExecution() != 1 || runs.count() != 1 {
			t.Fatalf("answer %v (replayed %v) after %d runs, want the first run's, replayed", resp.Msg, connectidempotency.Replayed(resp.Header()), runs.count())
		}
		if retries.Load() == 0 {
			t.Fatal("no retry")
		}
	})
}

// The client's own refusals and the server's carry the library's
// ErrorInfo: errors.Is finds the sentinel and Reason the reason, on a
// *connect.Error of the server's code.
func TestClientErrors(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		var runs runs
		srv, _ := memServer(t)
		r := newRig(t, p, setup{srv: srv, clientOpts: clientOpts(), handler: runs.handler})
		ctx := t.Context()
		if _, err := r.unary.Do(ctx, request("first", "k")); err != nil {
			t.Fatal(err)
		}
		_, err := r.unary.Do(ctx, request("second", "k"))
		wantCode(t, err, connect.CodeFailedPrecondition, idempotency.ErrKeyReused.Reason)
		if !errors.Is(err, idempotency.ErrKeyReused) || idempotency.Reason(err) != idempotency.ErrKeyReused.Reason {
			t.Fatalf("errors.Is(%v, ErrKeyReused) = false, or Reason %q", err, idempotency.Reason(err))
		}
		kctx, err := idempotency.ContextWithKey(ctx, "k-ctx")
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.unary.Do(kctx, request("third", "k-other"))
		wantCode(t, err, connect.CodeInvalidArgument, idempotency.ErrKeyInvalid.Reason)
		if !errors.Is(err, idempotency.ErrKeyInvalid) {
			t.Fatalf("errors.Is(%v, ErrKeyInvalid) = false", err)
		}
		if _, err := r.unary.Do(kctx, request("third", "")); err != nil {
			t.Fatal(err)
		}
		if got := runs.keys[len(runs.keys)-1]; got != "k-ctx" {
			t.Fatalf("key %q, want the context's", got)
		}
		if _, err := r.unary.Read(ctx, request("read", "")); err != nil {
			t.Fatal(err)
		}
		if got := runs.keys[len(runs.keys)-1]; got != "" {
			t.Fatalf("a NO_SIDE_EFFECTS call carried the key %q", got)
		}
	})
}

// A server stream cut after some messages is resumed with its key: the
// caller gets every message once, in order, and the handler runs once.
func TestClientResumesCutStream(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		received, release := make(chan struct{}), make(chan struct{})
		streams := &connecttest.Streams{BeforeSend: func(_ context.Context, i int) {
			if i == 3 {
				<-received
				<-release
			}
		}}
		srv, _ := memServer(t, idempotency.WithWaitForInFlight(time.Minute))
		r := newRig(t, p, setup{srv: srv, streams: streams, proxied: true, clientOpts: clientOpts()})
		req := connect.NewRequest(&testingv1.DoRequest{Payload: "dl", Amount: 8, RequestId: "rid"})
		stream, err := r.streams.Download(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		defer stream.Close()
		var got []int64
		for stream.Receive() {
			got = append(got, stream.Msg().GetAmount())
			if len(got) == 3 {
				close(received)
				r.Proxy.CutAll()
				close(release)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(got) != 8 {
			t.Fatalf("got messages %v, want 0 to 7", got)
		}
		for i, a := range got {
			if a != int64(i) {
				t.Fatalf("got messages %v, want 0 to 7 once each, in order", got)
			}
		}
		if n := streams.Executions(); n != 1 {
			t.Fatalf("Download ran %d times, want 1", n)
		}
		if stream.ResponseHeader().Get("X-Execution") != "1" {
			t.Fatalf("header %v, want the live attempt's", stream.ResponseHeader())
		}
	})
}

// A client stream whose answer is cut is resent from the copies held: the
// handler runs once and the caller gets its answer.
func TestClientResendsUpload(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		answering, release := make(chan struct{}), make(chan struct{})
		var once atomic.Bool
		streams := &connecttest.Streams{BeforeAnswer: func(context.Context) {
			if once.CompareAndSwap(false, true) {
				close(answering)
				<-release
			}
		}}
		srv, _ := memServer(t, idempotency.WithWaitForInFlight(time.Minute))
		r := newRig(t, p, setup{srv: srv, streams: streams, proxied: true, clientOpts: clientOpts()})
		go func() {
			<-answering
			r.Proxy.CutAll()
			close(release)
		}()
		stream := r.streams.Upload(t.Context())
		for _, a := range []int64{1, 2, 3} {
			if err := stream.Send(&testingv1.DoRequest{Payload: "p", Amount: a}); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := stream.CloseAndReceive()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.GetAmount() != 6 || resp.Msg.GetExecution() != 1 || streams.Executions() != 1 {
			t.Fatalf("answer %v after %d runs, want the sum 6 of the one run", resp.Msg, streams.Executions())
		}
		if keys := streams.Keys(); len(keys) != 1 || len(keys[0]) != 1 {
			t.Fatalf("keys %q, want one run with one key", keys)
		}
	})
}

// Concurrent duplicates of one call, each through the client interceptor,
// which retries the key in flight: the handler runs once and every caller
// gets its answer.
func TestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	forEachProtocol(t, func(t *testing.T, p connecttest.Protocol) {
		var runs runs
		srv, _ := memServer(t, idempotency.WithRetryAfter(10*time.Millisecond))
		r := newRig(t, p, setup{srv: srv, handler: runs.handler, clientOpts: clientOpts(idempotency.WithMaxAttempts(100))})
		const callers = 16
		answers := make(chan string, callers)
		ctx, err := idempotency.ContextWithKey(t.Context(), "dup")
		if err != nil {
			t.Fatal(err)
		}
		for range callers {
			go func() {
				resp, err := r.unary.Do(ctx, request("pay", ""))
				if err != nil {
					answers <- err.Error()
					return
				}
				answers <- fmt.Sprint(resp.Msg.GetPayload(), resp.Msg.GetExecution())
			}()
		}
		for range callers {
			if got := <-answers; got != "pay1" {
				t.Errorf("a caller got %q, want the one run's answer", got)
			}
		}
		if n := runs.count(); n != 1 {
			t.Fatalf("the handler ran %d times for %d concurrent duplicates, want 1", n, callers)
		}
	})
}
