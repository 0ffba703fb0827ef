package idempotency_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
)

func TestLeaseRenewedWhileHandlerRuns(t *testing.T) {
	t.Parallel()
	const lease = 150 * time.Millisecond
	f := newFixture(t, nil, idempotency.WithLease(lease))
	ctx := withKey(t.Context(), "k-long")
	req := &testingv1.DoRequest{Sleep: durationpb.New(3 * lease)}
	if _, err := f.client.Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := f.events.Count(idempotency.DecisionLeaseRenewed); n < 2 {
		t.Fatalf("lease renewed %d times, want at least 2 over 3 leases", n)
	}
	if f.events.Count(idempotency.DecisionLeaseLost) != 0 {
		t.Fatal("lease lost although it was renewed")
	}
	if _, err := f.client.Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := f.srv.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (completed and replayed)", n)
	}
}

func TestNoRenewalForFastHandler(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if _, err := f.client.Do(withKey(t.Context(), "k-fast"), &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := f.store.Count("extend"); n != 0 {
		t.Fatalf("%d extend calls for a handler that finished inside lease/3", n)
	}
	if c, d := f.store.Count("claim"), f.store.Count("complete"); c != 1 || d != 1 {
		t.Fatalf("claim %d, complete %d; want 1 and 1", c, d)
	}
}

// TestLostLeaseNeverOverwrites pauses renewal so the first execution's lease
// runs out, lets a second execution take the key over and complete, and
// checks that the first execution's late completion is refused.
func TestLostLeaseNeverOverwrites(t *testing.T) {
	t.Parallel()
	const lease = 100 * time.Millisecond
	release := make(chan struct{})
	f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if req.GetPayload() == "first" {
			<-release
		}
		return testserver.Echo(ctx, m, req)
	}, idempotency.WithLease(lease), idempotency.WithFingerprint(func(method string, _ protoMessage) ([]byte, error) {
		return []byte(method), nil // payload differs between the two executions on purpose
	}))
	f.store.SkipExtend.Store(true)
	ctx := withKey(t.Context(), "k-lost")

	firstDone := make(chan *testingv1.DoResponse, 1)
	go func() {
		resp, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "first"})
		if err != nil {
			t.Error(err)
		}
		firstDone <- resp
	}()
	f.srv.Service.WaitExecutions(t, 1)
	time.Sleep(2 * lease) // the first lease runs out unrenewed
	second, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "second"})
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	first := <-firstDone
	if first.GetPayload() != "first" {
		t.Fatalf("first caller got %v, want its own answer", first)
	}
	f.events.Wait(t, idempotency.DecisionLeaseLost, 1)

	replay, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "third"})
	if err != nil {
		t.Fatal(err)
	}
	if replay.GetExecution() != second.GetExecution() || replay.GetPayload() != "second" {
		t.Fatalf("replay %v, want the second owner's record %v", replay, second)
	}
	if n := f.srv.Service.Executions(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}
