package idempotency_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/internal/test/wait"
)

// TestHostileAbandonedRace (decisions 291 and 292): many retries of one
// abandoned key race the take-over on three replicas sharing a store, two
// recovering and one blocking, with and without WithWaitForInFlight. The
// recovery holds its claim until every racer has tried the key. Exactly
// one recovery runs; the handler runs at most once (once when the
// recovery asks for it); every racer gets that one answer, or is told to
// come back (ABORTED) or that the outcome is unknown (the blocking
// replica, before the recovery stored it); and every later retry, on
// every replica, replays it.
func TestHostileAbandonedRace(t *testing.T) {
	t.Parallel()
	for _, rerun := range []bool{false, true} {
		for _, waitFor := range []time.Duration{0, time.Minute} {
			t.Run(fmt.Sprintf("rerun=%v wait=%v", rerun, waitFor), func(t *testing.T) {
				t.Parallel()
				hostileAbandonedRace(t, rerun, waitFor)
			})
		}
	}
}

func hostileAbandonedRace(t *testing.T, rerun bool, waitFor time.Duration) {
	const racers = 24
	fs := faultstoreOf(memStore(t))
	var recoveries, handled atomic.Int32
	release := make(chan struct{}) // closed once every racer has claimed
	recoverFn := func(context.Context, proto.Message) (proto.Message, error) {
		recoveries.Add(1)
		select { // hold the claim while the others race it
		case <-release:
		case <-time.After(wait.Timeout):
		}
		if rerun {
			return nil, idempotency.ErrRerun
		}
		return &testingv1.DoResponse{Payload: "recovered"}, nil
	}
	handler := func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		handled.Add(1)
		return &testingv1.DoResponse{Payload: "ran"}, nil
	}
	replica := func(opts ...idempotency.ServerOption) *testkit.Fixture {
		return newFixtureOn(t, fs, handler, append(opts, idempotency.WithWaitForInFlight(waitFor))...)
	}
	replicas := []*testkit.Fixture{
		replica(recovering(recoverFn)...), replica(recovering(recoverFn)...),
		replica(idempotency.WithAbandonedClaims(idempotency.AbandonBlock)),
	}
	req := &testingv1.DoRequest{Payload: "p"}
	abandonKey(t, fs, replicas[0].Idempotency, doMethod, doMethod, "k", req)

	want := map[bool]string{false: "recovered", true: "ran"}[rerun]
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, racers)
	for i := range racers {
		wg.Go(func() {
			<-start
			resp, err := replicas[i%len(replicas)].Client.Do(withKey(t.Context(), "k"), req)
			switch {
			case err == nil && resp.GetPayload() != want:
				err = fmt.Errorf("answer %q, want %q", resp.GetPayload(), want)
			case status.Code(err) == codes.Aborted && clientReason(err) == idempotency.ErrKeyInUse.Reason,
				status.Code(err) == codes.FailedPrecondition && clientReason(err) == idempotency.ErrOutcomeUnknown.Reason:
				err = nil
			}
			errs <- err
		})
	}
	close(start)
	// Every racer has claimed at least once before the recovery lets its
	// claim go.
	wait.For(t, func() bool { return fs.Count("claim") >= racers })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range replicas {
		resp, err := r.Client.Do(withKey(t.Context(), "k"), req)
		if err != nil || resp.GetPayload() != want {
			t.Fatalf("retry after the race: %v, %v; want %q replayed", resp, err, want)
		}
	}
	wantRuns := map[bool]int32{false: 0, true: 1}[rerun]
	if recoveries.Load() != 1 || handled.Load() != wantRuns {
		t.Fatalf("%d recoveries and %d handler runs, want 1 and %d", recoveries.Load(), handled.Load(), wantRuns)
	}
}
