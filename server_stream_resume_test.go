package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/streamtest"
)

// TestStreamResumeFailOpen: with the store down and WithFailOpen, a server
// stream's retry runs the handler without a claim and still sends only
// the messages after those the caller has (idempotency-resume-after), so
// the caller of the stream client interceptor gets each of its five
// messages once, and a manual retry resumed after 2 gets three.
func TestStreamResumeFailOpen(t *testing.T) {
	t.Parallel()
	t.Run("ClientRetry", func(t *testing.T) {
		t.Parallel()
		const n, k = 5, 2
		st := faultstore.New(memStore(t))
		svc := &streamtest.Streams{}
		s := idempotency.NewServer(st, idempotency.WithFailOpen(), idempotency.WithStoreTimeout(100*time.Millisecond))
		cc, proxy := streamtest.Proxied(t, svc, s, grpc.WithChainStreamInterceptor(idempotency.StreamClientInterceptor(
			idempotency.WithMaxAttempts(5),
			idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 10 * time.Millisecond }))))
		atK, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		svc.BeforeSend = func(_ context.Context, i int) {
			if i == k && svc.Executions() == 1 {
				once.Do(func() { close(atK) })
				<-release
			}
		}
		stream, err := testingv1.NewStreamServiceClient(cc).Download(t.Context(), &testingv1.DoRequest{Payload: "d", Amount: n}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatal(err)
		}
		var got []*testingv1.DoResponse
		for {
			if len(got) == k {
				<-atK
				st.Down.Store(true)
				proxy.CutAll()
				close(release)
			}
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
		if e := svc.Executions(); e != 2 {
			t.Fatalf("%d executions, want the claimed one and the fail-open retry's", e)
		}
	})
	t.Run("ManualRetry", func(t *testing.T) {
		t.Parallel()
		st := faultstore.New(memStore(t))
		st.Down.Store(true)
		svc, ev, c := streamsServer(t, st, idempotency.WithFailOpen())
		msgs, _, err := download(resumed(withKey(t.Context(), "open"), 2), c, &testingv1.DoRequest{Amount: 5})
		if err != nil || len(msgs) != 3 || msgs[0].GetAmount() != 2 {
			t.Fatalf("resumed after 2 with the store down: %d messages (first %v), %v; want messages 2 to 4", len(msgs), msgs, err)
		}
		if svc.Executions() != 1 || ev.Count(idempotency.DecisionFailOpen) != 1 {
			t.Fatalf("%d executions, %d fail-open events; want 1 and 1", svc.Executions(), ev.Count(idempotency.DecisionFailOpen))
		}
	})
}

// outputIndexes returns the index of each message of an interop stream,
// as its body says ("e<execution> m<index> ").
func outputIndexes(t *testing.T, a streamtest.Answer) []int {
	t.Helper()
	var out []int
	for _, b := range a.Messages {
		m := &testgrpc.StreamingOutputCallResponse{}
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatal(err)
		}
		var e, i int
		if _, err := fmt.Sscanf(strings.TrimRight(string(m.GetPayload().GetBody()), "\x00"), "e%d m%d ", &e, &i); err != nil {
			t.Fatalf("message body %q: %v", m.GetPayload().GetBody(), err)
		}
		out = append(out, i)
	}
	return out
}

// TestStreamResumeNested: a server stream through two idempotency stream
// interceptors over one store honours the resume point once: the outer
// one, which runs the handler under its claim (the inner one passing it
// through) or without one (both failing open), sends messages N+1
// onwards; the inner one does not skip them again.
func TestStreamResumeNested(t *testing.T) {
	t.Parallel()
	for _, down := range []bool{false, true} {
		t.Run(map[bool]string{false: "Claimed", true: "FailOpen"}[down], func(t *testing.T) {
			t.Parallel()
			st := faultstore.New(memStore(t))
			st.Down.Store(down)
			opts := append(streamtest.Policies(idempotency.MethodPolicy{Mode: idempotency.ModeRequired}), idempotency.WithFailOpen())
			outer, inner := idempotency.NewServer(st, opts...), idempotency.NewServer(st, opts...)
			svc := &streamtest.Service{}
			c := streamtest.Start(t, svc, nil, grpc.ChainStreamInterceptor(outer.StreamServerInterceptor(), inner.StreamServerInterceptor()))
			ctx := withKey(t.Context(), "nested")
			a := streamtest.Output(resumed(ctx, 2), c, streamtest.OutputRequest(5, 16))
			if got := outputIndexes(t, a); a.Err != nil || fmt.Sprint(got) != "[2 3 4]" || svc.Executions() != 1 {
				t.Fatalf("resumed after 2: messages %v, %v, %d executions; want [2 3 4] from one", got, a.Err, svc.Executions())
			}
			if down {
				return
			}
			a = streamtest.Output(ctx, c, streamtest.OutputRequest(5, 16))
			if got := outputIndexes(t, a); a.Err != nil || fmt.Sprint(got) != "[0 1 2 3 4]" || !a.Replayed || svc.Executions() != 1 {
				t.Fatalf("retry: messages %v, replayed %v, %v; want all 5 replayed", got, a.Replayed, a.Err)
			}
		})
	}
}
