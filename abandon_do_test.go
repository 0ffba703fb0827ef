package idempotency_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestAbandonedDo (decisions 290, 291, 292): Do follows its operation's
// policy (WithOperationPolicy, else WithAbandonedClaims): Rerun runs fn
// as Attempt 2; Block returns ErrOutcomeUnknown without running it;
// Recover's response, of Do's Resp type, is returned and then replayed;
// a response of another type fails the call with ErrMisconfigured and
// leaves the key abandoned, so the next call recovers again; ErrRerun
// runs fn once.
func TestAbandonedDo(t *testing.T) {
	t.Parallel()
	const op = "payments.capture"
	req := &testingv1.DoRequest{Payload: "p"}
	type result struct {
		resp     *testingv1.DoResponse
		replayed bool
		err      error
	}
	cases := []struct {
		name    string
		opts    []idempotency.ServerOption
		recover func(calls int) (proto.Message, error) // nil: no recovery
		check   func(t *testing.T, first, second result, fnRuns []idempotency.Claim, recoveries int)
	}{
		{"rerun by default", nil, nil, func(t *testing.T, first, second result, runs []idempotency.Claim, _ int) {
			if first.err != nil || second.err != nil || !second.replayed || len(runs) != 1 || runs[0].Attempt != 2 {
				t.Fatalf("%+v, %+v, runs %+v: want fn run once as Attempt 2, then a replay", first, second, runs)
			}
		}},
		{"block", []idempotency.ServerOption{idempotency.WithAbandonedClaims(idempotency.AbandonBlock)}, nil,
			func(t *testing.T, first, second result, runs []idempotency.Claim, _ int) {
				if !errors.Is(first.err, idempotency.ErrOutcomeUnknown) || !errors.Is(second.err, idempotency.ErrOutcomeUnknown) || len(runs) != 0 {
					t.Fatalf("%+v, %+v, runs %+v: want ErrOutcomeUnknown twice and no run", first, second, runs)
				}
			}},
		{"recover", nil, func(int) (proto.Message, error) { return &testingv1.DoResponse{Payload: "recovered"}, nil },
			func(t *testing.T, first, second result, runs []idempotency.Claim, recoveries int) {
				if first.err != nil || first.replayed || first.resp.GetPayload() != "recovered" ||
					second.err != nil || !second.replayed || !proto.Equal(first.resp, second.resp) || len(runs) != 0 || recoveries != 1 {
					t.Fatalf("%+v, %+v, runs %+v, %d recoveries: want the recovered response, then its replay", first, second, runs, recoveries)
				}
			}},
		{"recover another type", nil, func(calls int) (proto.Message, error) {
			if calls == 1 {
				return &testingv1.DoRequest{}, nil
			}
			return &testingv1.DoResponse{Payload: "recovered"}, nil
		}, func(t *testing.T, first, second result, runs []idempotency.Claim, recoveries int) {
			if !errors.Is(first.err, idempotency.ErrMisconfigured) || second.err != nil || second.resp.GetPayload() != "recovered" || len(runs) != 0 || recoveries != 2 {
				t.Fatalf("%+v, %+v, runs %+v, %d recoveries: want ErrMisconfigured, then a second recovery", first, second, runs, recoveries)
			}
		}},
		{"recover asks to rerun", nil, func(int) (proto.Message, error) { return nil, idempotency.ErrRerun },
			func(t *testing.T, first, second result, runs []idempotency.Claim, recoveries int) {
				if first.err != nil || first.resp.GetPayload() != "ran" || !second.replayed || len(runs) != 1 || runs[0].Attempt != 2 || recoveries != 1 {
					t.Fatalf("%+v, %+v, runs %+v, %d recoveries: want fn run once as Attempt 2", first, second, runs, recoveries)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var recoveries atomic.Int32
			opts := tc.opts
			if tc.recover != nil {
				opts = append(opts, idempotency.WithOperationPolicy(op, idempotency.MethodPolicy{Abandoned: idempotency.AbandonRecover,
					Recover: func(ctx context.Context, got proto.Message) (proto.Message, error) {
						if cl, _ := idempotency.ClaimFromContext(ctx); cl.Attempt < 2 || !proto.Equal(got, req) {
							t.Errorf("recovery of %v under %+v", got, cl)
						}
						return tc.recover(int(recoveries.Add(1)))
					}}))
			}
			mem := memStore(t)
			s := idempotency.NewServer(mem, opts...)
			ab := abandonKey(t, mem, s, op, op, "k", req)
			var runs claims
			call := func() result {
				resp, replayed, err := idempotency.Do(t.Context(), s, op, "k", req, func(ctx context.Context) (*testingv1.DoResponse, error) {
					runs.record(ctx)
					return &testingv1.DoResponse{Payload: "ran"}, nil
				})
				return result{resp, replayed, err}
			}
			first := call()
			if tc.name == "recover another type" {
				wantState(t, mem, ab.StoreKey, store.StateAbandoned)
			}
			second := call()
			tc.check(t, first, second, runs.all(), int(recoveries.Load()))
		})
	}
}

// TestAbandonedOnce (decision 292): under Recover, a recovery that
// returns without an error, whatever its response, completes Once's key:
// ran is false (fn did not run), and so is every later call's. A recovery
// that asks to rerun runs fn: ran is true.
func TestAbandonedOnce(t *testing.T) {
	t.Parallel()
	const op = "ledger.post"
	for _, rerun := range []bool{false, true} {
		t.Run(map[bool]string{false: "recovered", true: "rerun"}[rerun], func(t *testing.T) {
			t.Parallel()
			var recoveries atomic.Int32
			mem := memStore(t)
			s := idempotency.NewServer(mem, idempotency.WithOperationPolicy(op, idempotency.MethodPolicy{Abandoned: idempotency.AbandonRecover,
				Recover: func(context.Context, proto.Message) (proto.Message, error) {
					recoveries.Add(1)
					if rerun {
						return nil, idempotency.ErrRerun
					}
					return nil, nil
				}}))
			ab := abandonKey(t, mem, s, op, op, "k", &emptypb.Empty{})
			var fnRuns atomic.Int32
			fn := func(context.Context) error { fnRuns.Add(1); return nil }
			ran, err := idempotency.Once(t.Context(), s, op, "k", nil, fn)
			if err != nil || ran != rerun || fnRuns.Load() != map[bool]int32{false: 0, true: 1}[rerun] {
				t.Fatalf("first Once: ran %v, %v, fn ran %d times", ran, err, fnRuns.Load())
			}
			if ran, err := idempotency.Once(t.Context(), s, op, "k", nil, fn); ran || err != nil {
				t.Fatalf("second Once: ran %v, %v; want a replay", ran, err)
			}
			if recoveries.Load() != 1 {
				t.Fatalf("%d recoveries, want 1", recoveries.Load())
			}
			wantState(t, mem, ab.StoreKey, store.StateCompleted)
		})
	}
}

// TestAbandonedSealedRotated (decision 294): under WithSealing, the claim
// of a server that died before a key rotation has the request's
// fingerprint keyed by the older key: a server whose primary key is the
// newer one, and which still holds the older, takes it over as the same
// request and runs the function as Attempt 2. An entry written before
// sealing is refused with ErrOutcomeUnknown.
func TestAbandonedSealedRotated(t *testing.T) {
	t.Parallel()
	const op = "payments.capture"
	mem := memStore(t)
	k1, k2 := sealingKey("k1", 1), sealingKey("k2", 2)
	rerun := idempotency.WithAbandonedClaims(idempotency.AbandonRerun) // keeps the abandoned entry
	before := sealedServer(mem, idempotency.NewKeyring(k1), rerun)
	after := sealedServer(mem, idempotency.NewKeyring(k2, k1), rerun)
	ctx := asTenant(t.Context(), "acme")
	req := &testingv1.DoRequest{Payload: "p"}
	running, finish := make(chan idempotency.Claim, 1), make(chan struct{})
	dead := make(chan error, 1)
	go func() {
		_, _, err := idempotency.Do(ctx, before, op, "k", req, func(ctx context.Context) (*testingv1.DoResponse, error) {
			cl, _ := idempotency.ClaimFromContext(ctx)
			running <- cl
			<-finish
			return &testingv1.DoResponse{Payload: "late"}, nil
		})
		dead <- err
	}()
	cl := <-running
	if err := mem.Abandon(t.Context(), cl.StoreKey, cl.Token); err != nil {
		t.Fatal(err)
	}
	var runs claims
	resp, _, err := idempotency.Do(ctx, after, op, "k", req, func(ctx context.Context) (*testingv1.DoResponse, error) {
		runs.record(ctx)
		return &testingv1.DoResponse{Payload: "again"}, nil
	})
	close(finish)
	if err != nil || resp.GetPayload() != "again" {
		t.Fatalf("after the rotation: %v, %v; want the function run again", resp, err)
	}
	if got := runs.all(); len(got) != 1 || got[0].Attempt != 2 {
		t.Fatalf("runs under %+v, want one as Attempt 2", got)
	}
	// Its late outcome is refused by the store, the claim taken over: its
	// caller is told to retry the key for the stored one (decision 314).
	if err := <-dead; !errors.Is(err, idempotency.ErrKeyInUse) {
		t.Fatalf("the late run: %v, want ErrKeyInUse", err)
	}
	resp, replayed, err := idempotency.Do(ctx, after, op, "k", req, func(context.Context) (*testingv1.DoResponse, error) {
		t.Error("ran a third time")
		return nil, nil
	})
	if err != nil || !replayed || resp.GetPayload() != "again" {
		t.Fatalf("retry: %v, %v, %v; want the take-over's outcome replayed", resp, replayed, err)
	}
	// An entry written before sealing (its fingerprint unkeyed) is the
	// same request, but is not taken over.
	abandonKey(t, mem, after, op, op, "legacy", req)
	_, _, err = idempotency.Do(t.Context(), after, op, "legacy", req, func(context.Context) (*testingv1.DoResponse, error) {
		t.Error("ran over an entry written before sealing")
		return nil, nil
	})
	if !errors.Is(err, idempotency.ErrOutcomeUnknown) {
		t.Fatalf("entry written before sealing: %v, want ErrOutcomeUnknown", err)
	}
}
