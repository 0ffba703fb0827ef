package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/store"
)

// abandoned is a claim [abandonKey] abandoned: its store key and token,
// and when it was made, by the test's clock (a take-over's Previous).
type abandoned struct {
	StoreKey, Token string
	ClaimedAt       time.Time
}

// abandonKey makes the key of name (a method or an operation) abandoned
// in st, as a server that died holding its claim leaves it: it claims the
// store key srv derives, with the fingerprint of req under id (the method,
// its namespace or the operation), keeping it for an hour past its lease,
// and ends the lease at once with Abandon. No sleep: the store says so.
// Through a fault store, it reaches the real store: the fault store
// records only the servers' calls.
func abandonKey(t *testing.T, st store.Store, srv *idempotency.Server, name, id, key string, req proto.Message) abandoned {
	t.Helper()
	if fs, ok := st.(*faultstore.Store); ok {
		st = fs.Store
	}
	sk, err := srv.StoreKey(name, "", key)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := idempotency.Fingerprint(id, req)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	cl, err := st.Claim(t.Context(), sk, fp, time.Minute, store.ClaimOptions{Keep: time.Hour})
	if err != nil || !cl.Won() {
		t.Fatalf("claim of a free key: %+v, %v", cl, err)
	}
	if err := st.Abandon(t.Context(), sk, cl.Token); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	return abandoned{StoreKey: sk, Token: cl.Token, ClaimedAt: at}
}

// wantState fails the test unless the store entry of sk is in state want.
func wantState(t *testing.T, st store.Store, sk string, want store.State) {
	t.Helper()
	if fs, ok := st.(*faultstore.Store); ok {
		st = fs.Store
	}
	info, err := st.(store.Inspector).Lookup(t.Context(), sk)
	if err != nil {
		t.Fatalf("lookup %s: %v", sk, err)
	}
	if info.State != want {
		t.Fatalf("entry is %v, want %v", info.State, want)
	}
}

// claims records the claim every execution of a handler ran under.
type claims struct {
	mu   sync.Mutex
	list []idempotency.Claim
}

func (c *claims) record(ctx context.Context) {
	cl, ok := idempotency.ClaimFromContext(ctx)
	if !ok {
		panic("handler runs without a claim")
	}
	c.mu.Lock()
	c.list = append(c.list, cl)
	c.mu.Unlock()
}

func (c *claims) all() []idempotency.Claim {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]idempotency.Claim(nil), c.list...)
}

// echoing is a handler that records its claim and echoes.
func (c *claims) echoing(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
	c.record(ctx)
	return &testingv1.DoResponse{Payload: req.GetPayload()}, nil
}

var (
	doMethod     = testingv1.TestService_Do_FullMethodName
	faultstoreOf = faultstore.New
)

// TestAbandonedRerunByDefault (decisions 290 and 293): a key whose claim
// was abandoned (by a server with a policy that keeps it) is taken over by
// the next call of a server with no policy set, which runs the handler
// again under Attempt 2 and the abandoned attempt's claim time; its
// claims keep nothing (earlier releases' entries) and take an abandoned
// entry over. A first run is Attempt 1; the take-over's outcome is stored
// and replayed as any other.
func TestAbandonedRerunByDefault(t *testing.T) {
	t.Parallel()
	var seen claims
	f := newFixture(t, seen.echoing)
	req := &testingv1.DoRequest{Payload: "p"}
	if _, err := f.Client.Do(withKey(t.Context(), "fresh"), req); err != nil {
		t.Fatal(err)
	}
	ab := abandonKey(t, f.Store, f.Idempotency, doMethod, doMethod, "k", req)
	resp, err := f.Client.Do(withKey(t.Context(), "k"), req)
	if err != nil || resp.GetPayload() != "p" {
		t.Fatalf("take-over: %v, %v", resp, err)
	}
	got := seen.all()
	if len(got) != 2 || got[0].Attempt != 1 || !got[0].Previous.IsZero() {
		t.Fatalf("claims %+v: want a first run with Attempt 1 and no Previous", got)
	}
	if c := got[1]; c.Attempt != 2 || c.Token == ab.Token || c.StoreKey != ab.StoreKey ||
		c.Previous.Before(ab.ClaimedAt.Add(-time.Second)) || c.Previous.After(ab.ClaimedAt.Add(time.Second)) {
		t.Fatalf("take-over claim %+v, want Attempt 2, a new token and Previous ≈ %v", c, ab.ClaimedAt)
	}
	if n := f.Events.Count(idempotency.DecisionTakenOver); n != 1 {
		t.Fatalf("%d taken_over events, want 1: %v", n, f.Events)
	}
	for _, ev := range f.Events.All() {
		if ev.Decision == idempotency.DecisionTakenOver && (ev.Attempt != 2 || ev.StoreKey != ab.StoreKey) {
			t.Fatalf("taken_over event %+v, want Attempt 2 of %s", ev, ab.StoreKey)
		}
	}
	// No policy is set: a claim keeps nothing, writing what earlier
	// releases write, and takes an abandoned entry over.
	for _, c := range f.Faults.Calls() {
		if c.Op == "claim" && (c.Opts.Keep != 0 || !c.Opts.TakeOver) {
			t.Fatalf("claim options %+v, want no Keep and TakeOver", c.Opts)
		}
	}
	// The outcome is stored: a retry replays it, and nothing runs again.
	if _, err := f.Client.Do(withKey(t.Context(), "k"), req); err != nil || len(seen.all()) != 2 {
		t.Fatalf("retry: %v, %d runs; want a replay", err, len(seen.all()))
	}
	wantState(t, f.Store, ab.StoreKey, store.StateCompleted)
}

// TestAbandonedRerunKeeps (decision 290): under WithAbandonedClaims(
// AbandonRerun), set explicitly, every claim keeps its entry for the
// retention once its lease has run out, so a server killed mid-handler
// leaves the key abandoned, and the next run is Attempt 2; under no
// policy, the same crash leaves nothing behind and the next run is
// Attempt 1, as in earlier releases.
func TestAbandonedRerunKeeps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		opts    []idempotency.ServerOption
		attempt int
	}{
		{"explicit rerun", []idempotency.ServerOption{idempotency.WithAbandonedClaims(idempotency.AbandonRerun)}, 2},
		{"no policy", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var seen claims
			running, finish := make(chan idempotency.Claim, 1), make(chan struct{})
			f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				if len(seen.all()) == 0 {
					seen.record(ctx)
					cl, _ := idempotency.ClaimFromContext(ctx)
					running <- cl
					<-finish // the server "dies": its claim is abandoned below
					return nil, errors.New("gone")
				}
				seen.record(ctx)
				return &testingv1.DoResponse{Payload: req.GetPayload()}, nil
			}, tc.opts...)
			req := &testingv1.DoRequest{Payload: "p"}
			first := make(chan error, 1)
			go func() {
				_, err := f.Client.Do(withKey(t.Context(), "k"), req)
				first <- err
			}()
			cl := <-running
			// The store ends the lease as a crash does once the lease
			// runs out: kept as abandoned with a keep, gone without.
			if err := f.Store.Abandon(t.Context(), cl.StoreKey, cl.Token); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Client.Do(withKey(t.Context(), "k"), req); err != nil {
				t.Fatal(err)
			}
			close(finish)
			if err := <-first; err == nil {
				t.Fatal("the abandoned run answered OK, but its handler failed")
			}
			if got := seen.all(); len(got) != 2 || got[1].Attempt != tc.attempt {
				t.Fatalf("runs %+v, want the second as Attempt %d", got, tc.attempt)
			}
		})
	}
}

// TestAbandonedTakeOverNeedsSameRequest (decision 294): an abandoned key
// called with another request is refused as a reused key, under every
// policy, and the entry stays abandoned.
func TestAbandonedTakeOverNeedsSameRequest(t *testing.T) {
	t.Parallel()
	for _, p := range []idempotency.AbandonPolicy{idempotency.AbandonRerun, idempotency.AbandonBlock} {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil, idempotency.WithAbandonedClaims(p))
			ab := abandonKey(t, f.Store, f.Idempotency, doMethod, doMethod, "k", &testingv1.DoRequest{Payload: "first"})
			_, err := f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "other"})
			wantReason(t, err, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason)
			if f.Service.Executions() != 0 {
				t.Fatal("the handler ran")
			}
			wantState(t, f.Store, ab.StoreKey, store.StateAbandoned)
		})
	}
}

// TestAbandonedBlock (decision 291): under AbandonBlock every call of an
// abandoned key, many at once, is refused with FAILED_PRECONDITION and
// IDEMPOTENCY_OUTCOME_UNKNOWN, without RetryInfo; the handler never runs,
// every refusal is a blocked event, and the claims never take over.
func TestAbandonedBlock(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	req := &testingv1.DoRequest{Payload: "p"}
	ab := abandonKey(t, f.Store, f.Idempotency, doMethod, doMethod, "k", req)
	const callers = 32
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			_, err := f.Client.Do(withKey(t.Context(), "k"), req)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		wantReason(t, err, codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason)
		if _, ri := errorInfo(err); ri != nil {
			t.Fatalf("RetryInfo %v on an outcome unknown: the client must not retry", ri)
		}
	}
	if n := f.Service.Executions(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
	if n := f.Events.Count(idempotency.DecisionBlocked); n != callers {
		t.Fatalf("%d blocked events, want %d", n, callers)
	}
	for _, c := range f.Faults.Calls() {
		if c.Op != "claim" || c.Opts.TakeOver || c.Opts.Keep != defaultRetention {
			t.Fatalf("store call %+v: want only claims that keep and do not take over", c)
		}
	}
	wantState(t, f.Store, ab.StoreKey, store.StateAbandoned)
}

// TestAbandonedLateComplete: the handler of a claim that was abandoned
// while it ran (its lease ended; here the store ends it) still stores its
// outcome when it returns; until then a blocking server refuses the key,
// and afterwards replays the outcome.
func TestAbandonedLateComplete(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	var late sync.WaitGroup
	running, finish := make(chan idempotency.Claim, 1), make(chan struct{})
	slow := newFixtureOn(t, faultstoreOf(mem), func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		cl, _ := idempotency.ClaimFromContext(ctx)
		running <- cl
		<-finish
		return &testingv1.DoResponse{Payload: "late " + req.GetPayload()}, nil
	}, idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	other := newFixtureOn(t, faultstoreOf(mem), nil, idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	req := &testingv1.DoRequest{Payload: "p"}
	late.Add(1)
	var lateResp *testingv1.DoResponse
	var lateErr error
	go func() {
		defer late.Done()
		lateResp, lateErr = slow.Client.Do(withKey(t.Context(), "k"), req)
	}()
	cl := <-running
	if err := mem.Abandon(t.Context(), cl.StoreKey, cl.Token); err != nil {
		t.Fatal(err)
	}
	_, err := other.Client.Do(withKey(t.Context(), "k"), req)
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason)
	close(finish)
	late.Wait()
	if lateErr != nil || lateResp.GetPayload() != "late p" {
		t.Fatalf("late handler answered %v, %v", lateResp, lateErr)
	}
	if n := slow.Events.Count(idempotency.DecisionExecuted); n != 1 {
		t.Fatalf("%d executed events on the late server, want 1: %v", n, slow.Events)
	}
	var header metadata.MD
	resp, err := other.Client.Do(withKey(t.Context(), "k"), req, grpc.Header(&header))
	if err != nil || resp.GetPayload() != "late p" || !idempotency.Replayed(header, nil) {
		t.Fatalf("after the late outcome: %v, %v (header %v); want its replay", resp, err, header)
	}
	if other.Service.Executions() != 0 {
		t.Fatal("the blocking server ran its handler")
	}
}

// recovering returns the options that give the test service's Do method
// the policy AbandonRecover with f.
func recovering(f idempotency.RecoverFunc) []idempotency.ServerOption {
	return []idempotency.ServerOption{idempotency.WithMethodPolicy(doMethod, idempotency.MethodPolicy{
		Abandoned: idempotency.AbandonRecover, Recover: f})}
}

// TestAbandonedRecover (decision 292): the RecoverFunc runs instead of
// the handler, with the request and the new claim in its context; its
// response is stored and answered as the handler's (a recovered event,
// with the attempt), and the next retry gets it replayed byte for byte.
// A stored error it returns is kept as a handler's.
func TestAbandonedRecover(t *testing.T) {
	t.Parallel()
	t.Run("response", func(t *testing.T) {
		t.Parallel()
		var runs claims
		f := newFixture(t, nil, recovering(func(ctx context.Context, req proto.Message) (proto.Message, error) {
			runs.record(ctx)
			return &testingv1.DoResponse{Payload: "recovered " + req.(*testingv1.DoRequest).GetPayload(), Execution: 7}, nil
		})...)
		req := &testingv1.DoRequest{Payload: "p"}
		ab := abandonKey(t, f.Store, f.Idempotency, doMethod, doMethod, "k", req)
		var h1, h2 metadata.MD
		first, err := f.Client.Do(withKey(t.Context(), "k"), req, grpc.Header(&h1))
		if err != nil || first.GetPayload() != "recovered p" || idempotency.Replayed(h1, nil) {
			t.Fatalf("recovery answered %v, %v (header %v)", first, err, h1)
		}
		again, err := f.Client.Do(withKey(t.Context(), "k"), req, grpc.Header(&h2))
		if err != nil || !idempotency.Replayed(h2, nil) {
			t.Fatalf("retry: %v, %v (header %v); want a replay", again, err, h2)
		}
		b1, _ := proto.MarshalOptions{Deterministic: true}.Marshal(first)
		b2, _ := proto.MarshalOptions{Deterministic: true}.Marshal(again)
		if !bytes.Equal(b1, b2) {
			t.Fatalf("replay %x, want the recovered response %x", b2, b1)
		}
		if got := runs.all(); len(got) != 1 || got[0].Attempt != 2 || got[0].StoreKey != ab.StoreKey {
			t.Fatalf("recovery ran under %+v, want once under Attempt 2", got)
		}
		if f.Service.Executions() != 0 {
			t.Fatal("the handler ran")
		}
		if f.Events.Count(idempotency.DecisionRecovered) != 1 || f.Events.Count(idempotency.DecisionExecuted) != 0 {
			t.Fatalf("events %v, want one recovered and no executed", f.Events)
		}
		for _, ev := range f.Events.All() {
			if ev.Decision == idempotency.DecisionRecovered && ev.Attempt != 2 {
				t.Fatalf("recovered event %+v, want Attempt 2", ev)
			}
		}
	})
	t.Run("stored error", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil, recovering(func(context.Context, proto.Message) (proto.Message, error) {
			return nil, status.Error(codes.InvalidArgument, "the first attempt was refused")
		})...)
		req := &testingv1.DoRequest{Payload: "p"}
		ab := abandonKey(t, f.Store, f.Idempotency, doMethod, doMethod, "k", req)
		for i := range 2 {
			var trailer metadata.MD
			_, err := f.Client.Do(withKey(t.Context(), "k"), req, grpc.Trailer(&trailer))
			if status.Code(err) != codes.InvalidArgument || idempotency.Replayed(nil, trailer) != (i == 1) {
				t.Fatalf("call %d: %v (trailer %v)", i+1, err, trailer)
			}
		}
		wantState(t, f.Store, ab.StoreKey, store.StateCompleted)
	})
}

// TestAbandonedRecoverRerun (decision 292): a recovery that returns
// ErrRerun runs the handler once, under the same claim (Attempt 2); its
// outcome is stored and replayed.
func TestAbandonedRecoverRerun(t *testing.T) {
	t.Parallel()
	var recovered, ran claims
	h := ran.echoing
	f := newFixture(t, h, recovering(func(ctx context.Context, _ proto.Message) (proto.Message, error) {
		recovered.record(ctx)
		return nil, idempotency.ErrRerun
	})...)
	req := &testingv1.DoRequest{Payload: "p"}
	abandonKey(t, f.Store, f.Idempotency, doMethod, doMethod, "k", req)
	for range 3 {
		if resp, err := f.Client.Do(withKey(t.Context(), "k"), req); err != nil || resp.GetPayload() != "p" {
			t.Fatalf("%v, %v", resp, err)
		}
	}
	r, h2 := recovered.all(), ran.all()
	if len(r) != 1 || len(h2) != 1 || r[0] != h2[0] || h2[0].Attempt != 2 {
		t.Fatalf("recovery under %+v, handler under %+v: want each once, under one claim of Attempt 2", r, h2)
	}
	if f.Events.Count(idempotency.DecisionExecuted) != 1 {
		t.Fatalf("events %v, want one executed", f.Events)
	}
}

// TestAbandonedRecoverCannotTell (decision 292): a recovery that returns
// ErrOutcomeUnknown, panics, returns a retryable error or a response of
// another type gives the key back abandoned (the store's Abandon) and
// fails the call: OUTCOME_UNKNOWN, the retryable error itself, INTERNAL.
// The handler never runs; a server that blocks then refuses the key, and
// the next call of the recovering server recovers again, as Attempt 3.
func TestAbandonedRecoverCannotTell(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		answer func() (proto.Message, error)
		code   codes.Code
		reason string
	}{
		{"outcome unknown", func() (proto.Message, error) {
			return nil, errors.Join(errors.New("ledger unreachable"), idempotency.ErrOutcomeUnknown)
		}, codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason},
		{"panic", func() (proto.Message, error) { panic("ledger driver bug") }, codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason},
		{"retryable error", func() (proto.Message, error) {
			return nil, status.Error(codes.Unavailable, "ledger down")
		}, codes.Unavailable, ""},
		{"wrong type", func() (proto.Message, error) {
			return &testingv1.DoRequest{}, nil
		}, codes.Internal, idempotency.ErrMisconfigured.Reason},
		{"nil response", func() (proto.Message, error) { return nil, nil }, codes.Internal, idempotency.ErrMisconfigured.Reason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var runs claims
			mem := memStore(t)
			f := newFixtureOn(t, faultstoreOf(mem), nil, recovering(func(ctx context.Context, _ proto.Message) (proto.Message, error) {
				runs.record(ctx)
				return tc.answer()
			})...)
			blocking := newFixtureOn(t, faultstoreOf(mem), nil, idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
			req := &testingv1.DoRequest{Payload: "p"}
			ab := abandonKey(t, f.Store, f.Idempotency, doMethod, doMethod, "k", req)
			for i := range 2 {
				_, err := f.Client.Do(withKey(t.Context(), "k"), req)
				if status.Code(err) != tc.code || clientReason(err) != tc.reason {
					t.Fatalf("call %d: %v, want %v with reason %q", i+1, err, tc.code, tc.reason)
				}
				if n := f.Faults.Count("abandon"); n != i+1 {
					t.Fatalf("%d abandon calls after call %d", n, i+1)
				}
				wantState(t, mem, ab.StoreKey, store.StateAbandoned)
				_, err = blocking.Client.Do(withKey(t.Context(), "k"), req)
				wantReason(t, err, codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason)
			}
			if got := runs.all(); len(got) != 2 || got[0].Attempt != 2 || got[1].Attempt != 3 {
				t.Fatalf("recoveries under %+v, want Attempt 2 then 3", got)
			}
			if f.Service.Executions()+blocking.Service.Executions() != 0 {
				t.Fatal("a handler ran")
			}
			if tc.reason == idempotency.ErrOutcomeUnknown.Reason && f.Events.Count(idempotency.DecisionBlocked) != 2 {
				t.Fatalf("events %v, want a blocked event per call", f.Events)
			}
		})
	}
}

// TestAbandonedRerunFailureKeepsAttempts (decision 293): a handler that
// took a claim over and fails with a retryable error gives the key back
// abandoned, not free: the retry takes it over again as Attempt 3, so a
// handler always knows an earlier attempt may have acted.
func TestAbandonedRerunFailureKeepsAttempts(t *testing.T) {
	t.Parallel()
	var seen claims
	var failed atomic.Bool
	f := newFixture(t, func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		seen.record(ctx)
		if !failed.Swap(true) {
			return nil, status.Error(codes.Unavailable, "downstream busy")
		}
		return &testingv1.DoResponse{Payload: req.GetPayload()}, nil
	})
	req := &testingv1.DoRequest{Payload: "p"}
	ab := abandonKey(t, f.Store, f.Idempotency, doMethod, doMethod, "k", req)
	if _, err := f.Client.Do(withKey(t.Context(), "k"), req); status.Code(err) != codes.Unavailable {
		t.Fatalf("first take-over: %v", err)
	}
	wantState(t, f.Store, ab.StoreKey, store.StateAbandoned)
	if f.Faults.Count("abandon") != 1 || f.Faults.Count("release") != 0 {
		t.Fatalf("store calls %+v: want the claim abandoned, not released", f.Faults.Calls())
	}
	if _, err := f.Client.Do(withKey(t.Context(), "k"), req); err != nil {
		t.Fatal(err)
	}
	if got := seen.all(); len(got) != 2 || got[0].Attempt != 2 || got[1].Attempt != 3 {
		t.Fatalf("runs under %+v, want Attempt 2 then 3", got)
	}
}

// TestAbandonedLapseNeverReleases (decision 291): under block, a handler
// whose lease runs out while the store cannot be reached is cancelled,
// and the retryable error it then returns does not release the key: its
// side effect may have happened, so the key stays abandoned and a retry
// is refused, not run again. (Releasing would delete the abandoned entry
// and the retry would run the handler a second time.)
func TestAbandonedLapseNeverReleases(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	fs := faultstoreOf(mem)
	var effects atomic.Int32
	started, cancelled, resume := make(chan struct{}), make(chan struct{}), make(chan struct{})
	f := newFixtureOn(t, fs, func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if effects.Add(1) > 1 {
			return &testingv1.DoResponse{Payload: "again"}, nil
		}
		close(started)
		<-ctx.Done() // the lease ran out unrenewed
		close(cancelled)
		<-resume
		return nil, status.Error(codes.Unavailable, "gave up: "+context.Cause(ctx).Error())
	}, idempotency.WithAbandonedClaims(idempotency.AbandonBlock), idempotency.WithLease(300*time.Millisecond))
	req := &testingv1.DoRequest{Payload: "p"}
	first := make(chan error, 1)
	go func() {
		_, err := f.Client.Do(withKey(t.Context(), "k"), req)
		first <- err
	}()
	<-started
	fs.Down.Store(true) // every renewal fails until the lease runs out
	<-cancelled
	fs.Down.Store(false)
	close(resume)
	if err := <-first; status.Code(err) != codes.Unavailable {
		t.Fatalf("first call: %v, want its handler's UNAVAILABLE", err)
	}
	_, err := f.Client.Do(withKey(t.Context(), "k"), req)
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrOutcomeUnknown.Reason)
	if n := effects.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want once", n)
	}
}

// cancelAfterWin cancels the caller once a claim it won has been made:
// the caller gave up while its claim was under way.
type cancelAfterWin struct {
	store.Store
	cancel context.CancelFunc
}

func (s *cancelAfterWin) Claim(ctx context.Context, key string, fp []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	c, err := s.Store.Claim(ctx, key, fp, lease, opts)
	if err == nil && c.Won() {
		s.cancel()
	}
	return c, err
}

// TestAbandonedCallerGoneBeforeWork (decision 291): under block, a claim
// whose caller gave up before its work started is released, not left
// abandoned: nothing ran, so the next call runs the function rather than
// being refused as blocked.
func TestAbandonedCallerGoneBeforeWork(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	srv := idempotency.NewServer(&cancelAfterWin{Store: mem, cancel: cancel}, idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	t.Cleanup(func() { _ = srv.Close() })
	var runs atomic.Int32
	fn := func(context.Context) (*testingv1.DoResponse, error) {
		runs.Add(1)
		return &testingv1.DoResponse{Payload: "done"}, nil
	}
	req := &testingv1.DoRequest{Payload: "p"}
	if _, _, err := idempotency.Do(ctx, srv, "payments.charge", "k", req, fn); !errors.Is(err, context.Canceled) {
		t.Fatalf("first call: %v, want context.Canceled", err)
	}
	next := idempotency.NewServer(mem, idempotency.WithAbandonedClaims(idempotency.AbandonBlock))
	t.Cleanup(func() { _ = next.Close() })
	resp, _, err := idempotency.Do(t.Context(), next, "payments.charge", "k", req, fn)
	if err != nil || resp.GetPayload() != "done" || runs.Load() != 1 {
		t.Fatalf("next call: %v, %v, %d runs; want the function run once", resp, err, runs.Load())
	}
}
