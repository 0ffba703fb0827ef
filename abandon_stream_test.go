package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/streamtest"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestAbandonedStreams (decision 295): a client-streaming and a
// server-streaming method follow the abandon policy as a unary one does:
// under AbandonBlock an abandoned key is refused with OUTCOME_UNKNOWN and
// the handler never runs; under AbandonRerun it is taken over and the
// handler runs as Attempt 2.
func TestAbandonedStreams(t *testing.T) {
	t.Parallel()
	for _, p := range []idempotency.AbandonPolicy{idempotency.AbandonBlock, idempotency.AbandonRerun} {
		for _, method := range []string{streamtest.DownloadMethod, streamtest.UploadMethod} {
			t.Run(p.String()+" "+method, func(t *testing.T) {
				t.Parallel()
				var mu sync.Mutex
				var attempts []int
				svc := &streamtest.Streams{Finished: func(ctx context.Context, _ error) {
					cl, _ := idempotency.ClaimFromContext(ctx)
					mu.Lock()
					attempts = append(attempts, cl.Attempt)
					mu.Unlock()
				}}
				f := testkit.Start(t, testkit.Config{Options: []idempotency.ServerOption{idempotency.WithAbandonedClaims(p)},
					Register: func(r grpc.ServiceRegistrar) { testingv1.RegisterStreamServiceServer(r, svc) }})
				client := testingv1.NewStreamServiceClient(f.Server.Dial(t))
				req := &testingv1.DoRequest{Payload: "p", Amount: 2}
				abandonKey(t, f.Store, f.Idempotency, method, method, "k", req)
				err := callStream(withKey(t.Context(), "k"), client, method, req)
				if p == idempotency.AbandonBlock {
					wantReason(t, err, codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason)
					if svc.Executions() != 0 {
						t.Fatal("the handler ran")
					}
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil || len(attempts) != 1 || attempts[0] != 2 {
					t.Fatalf("%v; handler ran under attempts %v, want once as Attempt 2", err, attempts)
				}
			})
		}
	}
}

// callStream calls method of the StreamService with req, reads its
// answer, and returns the call's error.
func callStream(ctx context.Context, c testingv1.StreamServiceClient, method string, req *testingv1.DoRequest) error {
	if method == streamtest.UploadMethod {
		up, err := c.Upload(ctx)
		if err != nil {
			return err
		}
		if err := up.Send(req); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		_, err = up.CloseAndRecv()
		return err
	}
	down, err := c.Download(ctx, req)
	if err != nil {
		return err
	}
	for {
		if _, err := down.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// TestAbandonedWhileWaiting (decision 296): a call waiting for an
// in-flight key (WithWaitForInFlight) whose claim is abandoned while it
// waits gets OUTCOME_UNKNOWN under AbandonBlock, and takes the claim over
// under AbandonRerun: its poll claims with the method's options. The
// owner is another process (a claim made in the store), so the waiter
// polls; the claim is abandoned once the waiter has been refused once.
func TestAbandonedWhileWaiting(t *testing.T) {
	t.Parallel()
	for _, p := range []idempotency.AbandonPolicy{idempotency.AbandonBlock, idempotency.AbandonRerun} {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			var seen claims
			f := newFixture(t, seen.echoing, idempotency.WithAbandonedClaims(p), idempotency.WithWaitForInFlight(time.Minute))
			req := &testingv1.DoRequest{Payload: "p"}
			sk, _ := f.Idempotency.StoreKey(doMethod, "", "k")
			fp, _ := idempotency.Fingerprint(doMethod, req)
			owner, err := f.Store.Claim(t.Context(), sk, fp, time.Minute, store.ClaimOptions{Keep: time.Hour})
			if err != nil || !owner.Won() {
				t.Fatal(owner, err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := f.Client.Do(withKey(t.Context(), "k"), req)
				done <- err
			}()
			waitFor(t, func() bool { return f.Faults.Count("claim") >= 2 }) // the owner's and the waiter's first
			if err := f.Store.Abandon(t.Context(), sk, owner.Token); err != nil {
				t.Fatal(err)
			}
			err = <-done
			if p == idempotency.AbandonBlock {
				wantReason(t, err, codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason)
				if len(seen.all()) != 0 {
					t.Fatal("the handler ran")
				}
				return
			}
			if got := seen.all(); err != nil || len(got) != 1 || got[0].Attempt != 2 {
				t.Fatalf("%v; runs under %+v, want one as Attempt 2", err, got)
			}
		})
	}
}

// TestClientDoesNotRetryOutcomeUnknown: the client interceptor makes one
// attempt at a key whose outcome is unknown, however many retries it
// allows, and returns an error that is ErrOutcomeUnknown.
func TestClientDoesNotRetryOutcomeUnknown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	req := &testingv1.DoRequest{Payload: "p"}
	abandonKey(t, f.Store, f.Idempotency, doMethod, doMethod, "k", req)
	client := f.ClientWith(t, idempotency.UnaryClientInterceptor(idempotency.WithMaxAttempts(5), idempotency.WithBackoff(noBackoff)))
	_, err := client.Do(withKey(t.Context(), "k"), req)
	if !errors.Is(err, idempotency.ErrOutcomeUnknown) || idempotency.Reason(err) != "IDEMPOTENCY_OUTCOME_UNKNOWN" {
		t.Fatalf("%v, want ErrOutcomeUnknown", err)
	}
	if n := len(f.Attempts.All()); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

// TestSlogAbandoned: the slog observer writes a line for each decision
// about an abandoned key, with the claim's attempt: taken_over and
// recovered at Warn, blocked at Error.
func TestSlogAbandoned(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{ReplaceAttr: dropTime}))
	mem := memStore(t)
	recoverer := newFixtureOn(t, faultstoreOf(mem), nil, append(recovering(func(context.Context, protoMessage) (protoMessage, error) {
		return &testingv1.DoResponse{Payload: "recovered"}, nil
	}), idempotency.WithObserver(idempotency.NewSlogObserver(logger)))...)
	blocker := newFixtureOn(t, faultstoreOf(mem), nil, idempotency.WithAbandonedClaims(idempotency.AbandonBlock),
		idempotency.WithObserver(idempotency.NewSlogObserver(logger)))
	req := &testingv1.DoRequest{Payload: "p"}
	ab := abandonKey(t, mem, recoverer.Idempotency, doMethod, doMethod, "k", req)
	_, err := blocker.Client.Do(withKey(t.Context(), "k"), req)
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason)
	if _, err := recoverer.Client.Do(withKey(t.Context(), "k"), req); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := buf.String()
	mu.Unlock()
	for _, want := range []string{
		"level=ERROR msg=\"idempotency decision\" method=" + doMethod + " operation=" + doMethod + " decision=blocked store_key=" + ab.StoreKey,
		"level=WARN msg=\"idempotency decision\" method=" + doMethod + " operation=" + doMethod + " decision=taken_over store_key=" + ab.StoreKey,
		"decision=taken_over store_key=" + ab.StoreKey + " store_time=",
		"level=WARN msg=\"idempotency decision\" method=" + doMethod + " operation=" + doMethod + " decision=recovered store_key=" + ab.StoreKey,
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("log\n%s\nlacks %q", got, want)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		if (strings.Contains(line, "decision=taken_over") || strings.Contains(line, "decision=recovered")) && !strings.Contains(line, " attempt=2") {
			t.Fatalf("line %q lacks attempt=2", line)
		}
	}
}

// lockedWriter serializes writes of two servers' loggers to one buffer.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// dropTime leaves the time out of a slog record.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
