package idempotency_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// TestPostgresFourServersOneKey is proof 3: four servers, each with pools
// of its own on one database, and 200 concurrent callers sending one key
// with one request, spread over the servers; each caller's client retries
// while the key is in use. The handler charges once: one ledger row, and
// all 200 callers get the same answer.
func TestPostgresFourServersOneKey(t *testing.T) {
	t.Parallel()
	const servers, callers = 4, 200
	l := newPGLedger(t)
	slow := pgHooks{beforeComplete: func(ctx context.Context, _ *pgServer) {
		time.Sleep(50 * time.Millisecond) // the card network: duplicates pile up
	}}
	client := []idempotency.ClientOption{
		idempotency.WithMaxAttempts(100),
		idempotency.WithBackoff(func(context.Context, uint) time.Duration { return 10 * time.Millisecond }),
	}
	srvs := make([]*pgServer, servers)
	for i := range srvs {
		srvs[i] = l.server(t, pgServerConfig{id: i + 1, maxConns: 4, hooks: slow, client: client,
			opts: []idempotency.ServerOption{idempotency.WithRetryAfter(10 * time.Millisecond)}})
	}
	ctx := withKey(t.Context(), "k-one")
	req := &testingv1.DoRequest{Payload: "one"}
	answers := make([]*testingv1.DoResponse, callers)
	errs := make([]error, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			answers[i], errs[i] = srvs[i%servers].client.Do(ctx, req)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	var execs int64
	for _, s := range srvs {
		execs += s.srv.Service.Executions()
	}
	if execs != 1 {
		t.Fatalf("the handler ran %d times over four servers, want 1", execs)
	}
	if n := l.rows(t, "one"); n != 1 {
		t.Fatalf("the ledger holds %d charges, want 1", n)
	}
	// The executing caller's answer carries testserver's execution
	// number, set after the handler recorded the response: compare the
	// others with the recorded one.
	want := proto.Clone(answers[0]).(*testingv1.DoResponse)
	want.Execution = 0
	for i, a := range answers {
		got := proto.Clone(a).(*testingv1.DoResponse)
		got.Execution = 0
		if !proto.Equal(got, want) {
			t.Fatalf("caller %d got %v, caller 0 got %v", i, a, answers[0])
		}
	}
}

// TestPostgresCommitThenPanic is proof 4: server 1 commits the charge with
// its recorded answer and panics before answering. The recovery
// interceptor answers INTERNAL; the interceptor's release after the panic
// finds the committed record and leaves it; the retry on server 2 replays
// it, and the ledger holds one charge.
func TestPostgresCommitThenPanic(t *testing.T) {
	t.Parallel()
	l := newPGLedger(t)
	dies := l.server(t, pgServerConfig{id: 1, hooks: pgHooks{afterCommit: func(context.Context, *pgServer) {
		panic("the process dies before answering")
	}}, client: []idempotency.ClientOption{idempotency.WithoutRetry()}})
	other := l.server(t, pgServerConfig{id: 2})

	ctx := withKey(t.Context(), "k-panic")
	req := &testingv1.DoRequest{Payload: "panic"}
	if _, err := dies.client.Do(ctx, req); status.Code(err) != codes.Internal {
		t.Fatalf("server 1: %v, want INTERNAL from the recovery interceptor", err)
	}
	if got := l.states(t); !slices.Equal(got, []int{2}) {
		t.Fatalf("rows after the panic and its release: states %v, want one completed row", got)
	}
	if n := dies.events.Count(idempotency.DecisionExecuted); n != 1 {
		t.Fatalf("server 1 reported %d executions, want 1 (the release found the commit)", n)
	}
	var header metadata.MD
	resp, err := other.client.Do(ctx, req, grpc.Header(&header))
	if err != nil || resp.GetPayload() != "panic" || resp.GetAmount() != 1 || !replayedMD(header) {
		t.Fatalf("retry on server 2: %v, %v, header %v; want server 1's charge, replayed", resp, err, header)
	}
	if n := other.srv.Service.Executions(); n != 0 {
		t.Fatalf("server 2 ran the handler %d times, want 0", n)
	}
	if n := l.rows(t, "panic"); n != 1 {
		t.Fatalf("the ledger holds %d charges, want 1", n)
	}
}
