package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestLeaseRenewedWhileHandlerRuns(t *testing.T) {
	t.Parallel()
	const lease = 150 * time.Millisecond
	f := newFixture(t, nil, idempotency.WithLease(lease))
	ctx := withKey(t.Context(), "k-long")
	req := &testingv1.DoRequest{Sleep: durationpb.New(3 * lease)}
	if _, err := f.Client.Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := f.Events.Count(idempotency.DecisionLeaseRenewed); n < 2 {
		t.Fatalf("lease renewed %d times, want at least 2 over 3 leases", n)
	}
	if f.Events.Count(idempotency.DecisionLeaseLost) != 0 {
		t.Fatal("lease lost although it was renewed")
	}
	if _, err := f.Client.Do(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (completed and replayed)", n)
	}
}

func TestNoRenewalForFastHandler(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	if _, err := f.Client.Do(withKey(t.Context(), "k-fast"), &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := f.Faults.Count("extend"); n != 0 {
		t.Fatalf("%d extend calls for a handler that finished inside lease/3", n)
	}
	if c, d := f.Faults.Count("claim"), f.Faults.Count("complete"); c != 1 || d != 1 {
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
	f.Faults.SkipExtend.Store(true)
	ctx := withKey(t.Context(), "k-lost")

	firstDone := make(chan *testingv1.DoResponse, 1)
	go func() {
		resp, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "first"})
		if err != nil {
			t.Error(err)
		}
		firstDone <- resp
	}()
	f.Service.WaitExecutions(t, 1)
	time.Sleep(2 * lease) // the first lease runs out unrenewed
	second, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "second"})
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	first := <-firstDone
	if first.GetPayload() != "first" {
		t.Fatalf("first caller got %v, want its own answer", first)
	}
	f.Events.Wait(t, idempotency.DecisionLeaseLost, 1)

	replay, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "third"})
	if err != nil {
		t.Fatal(err)
	}
	if replay.GetExecution() != second.GetExecution() || replay.GetPayload() != "second" {
		t.Fatalf("replay %v, want the second owner's record %v", replay, second)
	}
	if n := f.Service.Executions(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

// overlapGuard counts executions and how many ran at once.
type overlapGuard struct {
	running, maxRunning, runs atomic.Int64
}

func (g *overlapGuard) handler(d time.Duration) testserver.HandlerFunc {
	return func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		g.runs.Add(1)
		n := g.running.Add(1)
		defer g.running.Add(-1)
		for {
			old := g.maxRunning.Load()
			if n <= old || g.maxRunning.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(d)
		return testserver.Echo(ctx, m, req)
	}
}

// callWhileHammered makes one keyed call and, once its handler has
// started, sends the same keyed call every 20ms until the first returns,
// failing the test on any duplicate answer but success or ABORTED in use.
func callWhileHammered(t *testing.T, f *fixture, g *overlapGuard, key string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := f.Client.Do(withKey(t.Context(), key), &testingv1.DoRequest{})
		done <- err
	}()
	waitFor(t, func() bool { return g.runs.Load() > 0 })
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		case <-tick.C:
		}
		_, err := f.Client.Do(withKey(t.Context(), key), &testingv1.DoRequest{})
		if err != nil && status.Code(err) != codes.Aborted {
			t.Errorf("duplicate: %v", err)
		}
	}
}

// TestStalledRenewalRetriedBeforeLeaseEnds: one renewal that stalls used to
// delay the next one by a full lease/3, so with a 600ms lease the key
// expired under a live handler and a duplicate ran it a second time, both
// at once. A failed renewal is now retried at once, until the lease ends.
func TestStalledRenewalRetriedBeforeLeaseEnds(t *testing.T) {
	t.Parallel()
	g := &overlapGuard{}
	f := newFixture(t, g.handler(1500*time.Millisecond), idempotency.WithLease(600*time.Millisecond))
	f.Faults.Stall("extend", 1)
	callWhileHammered(t, f, g, "k-stall")
	if n, most := g.runs.Load(), g.maxRunning.Load(); n != 1 || most != 1 {
		t.Fatalf("handler ran %d times, %d at once; want once", n, most)
	}
	if f.Events.Count(idempotency.DecisionLeaseLost) != 0 {
		t.Fatal("lease reported lost")
	}
}

// TestRenewalCoversStoringTheOutcome: renewal goes on while the outcome is
// being stored, so a Complete retried through store errors for longer than
// the lease keeps the key: duplicates meanwhile are held off, not run.
func TestRenewalCoversStoringTheOutcome(t *testing.T) {
	t.Parallel()
	g := &overlapGuard{}
	f := newFixture(t, g.handler(0), idempotency.WithLease(150*time.Millisecond))
	f.Faults.FailCompletes(5) // retried for 10+20+40+80+160 ms, over two leases
	callWhileHammered(t, f, g, "k-slow-complete")
	if n := g.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want once", n)
	}
	if f.Faults.Count("extend") == 0 {
		t.Fatal("no renewal while the outcome was being stored")
	}
	if f.Events.Count(idempotency.DecisionExecuted) != 1 {
		t.Fatal("outcome not stored")
	}
}

// TestRenewalAfterCompletionLandedIsNoAlarm: a Complete that landed but
// whose reply was lost is retried; a renewal that runs in between meets
// the completed entry and is refused. That is not a lost lease: the retried
// Complete, a no-op for its own token, tells, and no lease_lost is
// reported (the chaos soak saw about a hundred such false alarms).
func TestRenewalAfterCompletionLandedIsNoAlarm(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithLease(150*time.Millisecond))
	f.Faults.LoseCompleteReplies(4) // retried after 10+20+40+80 ms, past a renewal
	if _, err := f.Client.Do(withKey(t.Context(), "k-landed"), &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if f.Faults.Count("extend") == 0 {
		t.Fatal("no renewal ran between the Complete attempts: the test proves nothing")
	}
	if n := f.Events.Count(idempotency.DecisionLeaseLost); n != 0 {
		t.Fatalf("%d lease_lost reported for an outcome that was stored", n)
	}
	if n := f.Events.Count(idempotency.DecisionExecuted); n != 1 {
		t.Fatalf("%d executed, want 1", n)
	}
}

// TestLostLeaseCancelsHandlerWithCause: when the store says the claim is
// gone, or cannot renew it before it runs out, the handler's context is
// cancelled with a cause that matches store.ErrLeaseLost.
func TestLostLeaseCancelsHandlerWithCause(t *testing.T) {
	t.Parallel()
	cases := map[string]func(f *fixture, c idempotency.Claim){
		"claim removed": func(f *fixture, c idempotency.Claim) {
			// Evicted, as a full Redis without noeviction would: the
			// next renewal is refused.
			if err := f.Faults.Store.Release(context.Background(), c.StoreKey, c.Token); err != nil {
				panic(err)
			}
		},
		"store unreachable past the lease": func(f *fixture, _ idempotency.Claim) { f.Faults.Down.Store(true) },
	}
	for name, fault := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			causes := make(chan error, 1)
			var f *fixture
			f = newFixture(t, func(ctx context.Context, _ string, _ *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				c, _ := idempotency.ClaimFromContext(ctx)
				fault(f, c)
				select {
				case <-ctx.Done():
					causes <- context.Cause(ctx)
				case <-time.After(5 * time.Second):
					causes <- nil
				}
				return nil, status.Error(codes.Unavailable, "stopped")
			}, idempotency.WithLease(150*time.Millisecond))
			_, _ = f.Client.Do(withKey(t.Context(), "k-lost-cause"), &testingv1.DoRequest{})
			if cause := <-causes; !errors.Is(cause, store.ErrLeaseLost) {
				t.Fatalf("handler context cause %v, want one matching store.ErrLeaseLost", cause)
			}
		})
	}
}

// TestLeaseFloor: a lease shorter than the 100ms floor is raised to it, so the
// renewal cadence can be honoured.
func TestLeaseFloor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithLease(time.Millisecond))
	if _, err := f.Client.Do(withKey(t.Context(), "k-floor"), &testingv1.DoRequest{Sleep: durationpb.New(50 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	calls := f.Faults.Calls()
	if len(calls) == 0 || calls[0].Op != "claim" || calls[0].Duration != minLease {
		t.Fatalf("first store call %+v, want a claim with lease %v", calls, minLease)
	}
}
