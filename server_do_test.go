package idempotency_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// numbered is a function for Do that numbers its runs in n.
func numbered(n *atomic.Int64, req *testingv1.DoRequest) func(context.Context) (*testingv1.DoResponse, error) {
	return func(context.Context) (*testingv1.DoResponse, error) {
		return &testingv1.DoResponse{Payload: req.GetPayload(), Amount: req.GetAmount(), Execution: n.Add(1), Blob: []byte{0, 1, 2}}, nil
	}
}

// Do runs its function once per key across goroutines and across two
// Server values over one store; every call gets the first run's response,
// of the same type and bytes.
func TestDoRunsOnceAcrossServers(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	servers := [2]*idempotency.Server{}
	for i := range servers {
		servers[i] = idempotency.NewServer(mem, idempotency.WithWaitForInFlight(time.Minute))
	}
	req := &testingv1.DoRequest{Payload: "p", Amount: 1250}
	var runs atomic.Int64
	const callers = 32
	resps := make([]*testingv1.DoResponse, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], _, errs[i] = idempotency.Do(t.Context(), servers[i%2], "payments.charge", "k-1", req, numbered(&runs, req))
		}()
	}
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want 1", n)
	}
	first, _ := proto.Marshal(resps[0])
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if b, _ := proto.Marshal(resps[i]); string(b) != string(first) {
			t.Fatalf("call %d got %v, want %v", i, resps[i], resps[0])
		}
	}
}

// A replay returns the stored response exactly, with replayed true; the
// first call returns fn's own with replayed false.
func TestDoReplaysExactly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	req := &testingv1.DoRequest{Payload: "p", Amount: 7}
	var runs atomic.Int64
	first, replayed, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", req, numbered(&runs, req))
	if err != nil || replayed {
		t.Fatalf("first call: replayed %v, %v", replayed, err)
	}
	again, replayed, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", req, numbered(&runs, req))
	if err != nil || !replayed {
		t.Fatalf("second call: replayed %v, %v; want a replay", replayed, err)
	}
	if diff := cmp.Diff(first, again, protocmp.Transform()); diff != "" {
		t.Fatalf("replay differs (-first +replay):\n%s", diff)
	}
	if runs.Load() != 1 || f.Events.Count(idempotency.DecisionExecuted) != 1 || f.Events.Count(idempotency.DecisionReplayed) != 1 {
		t.Fatalf("runs %d, events %v", runs.Load(), f.Events.All())
	}
	if m := f.Events.All()[0].Method; m != "op" {
		t.Fatalf("event method %q, want the operation", m)
	}
}

// The same key with another request is ErrKeyReused; the key's own
// request still replays; a nil request fingerprints the operation alone.
func TestDoKeyReused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var runs atomic.Int64
	a, b := &testingv1.DoRequest{Amount: 1}, &testingv1.DoRequest{Amount: 2}
	if _, _, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", a, numbered(&runs, a)); err != nil {
		t.Fatal(err)
	}
	_, _, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", b, numbered(&runs, b))
	if !errors.Is(err, idempotency.ErrKeyReused) || idempotency.Reason(err) != idempotency.ErrKeyReused.Reason {
		t.Fatalf("other request: %v (reason %q), want ErrKeyReused", err, idempotency.Reason(err))
	}
	if f.Events.Count(idempotency.DecisionKeyReused) != 1 {
		t.Fatalf("events %v, want one key_reused", f.Events.All())
	}
	for i := range 2 {
		ran, err := idempotency.Once(t.Context(), f.Idempotency, "op-nil", "k", nil, func(context.Context) error { return nil })
		if err != nil || ran != (i == 0) {
			t.Fatalf("nil request, call %d: ran %v, %v", i+1, ran, err)
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("fn ran %d times, want 1", runs.Load())
	}
}

// A deterministic error (a status with a stored code) is stored and
// replayed as the same status; a retryable error and a panic release the
// claim, so the next call runs fn again.
func TestDoErrors(t *testing.T) {
	t.Parallel()
	stored := statusError(codes.InvalidArgument, "amount too big")
	for _, tc := range []struct {
		name     string
		fail     func() error
		runsWant int64
	}{
		{"deterministic", func() error { return stored }, 1},
		{"retryable status", func() error { return status.Error(codes.Unavailable, "down") }, 2},
		{"plain error", func() error { return errors.New("boom") }, 2},
		{"panic", func() error { panic("boom") }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			var runs atomic.Int64
			fn := func(context.Context) (*testingv1.DoResponse, error) {
				runs.Add(1)
				return nil, tc.fail()
			}
			var errs [2]error
			var replays [2]bool
			for i := range errs {
				func() {
					defer func() { _ = recover() }()
					_, replays[i], errs[i] = idempotency.Do(t.Context(), f.Idempotency, "op", "k", &testingv1.DoRequest{}, fn)
				}()
			}
			if n := runs.Load(); n != tc.runsWant {
				t.Fatalf("fn ran %d times, want %d", n, tc.runsWant)
			}
			if tc.runsWant == 1 {
				if !replays[1] || !proto.Equal(status.Convert(errs[1]).Proto(), status.Convert(stored).Proto()) {
					t.Fatalf("second call: replayed %v, %v; want the stored status %v", replays[1], errs[1], stored)
				}
			} else if n := f.Events.Count(idempotency.DecisionReleased); n != 2 {
				t.Fatalf("%d releases, want 2", n)
			}
		})
	}
}

// fn runs on, on a context that carries the claim and is not cancelled,
// when the caller's context ends; its outcome is stored and replayed.
func TestDoCallerLeaves(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	var runs atomic.Int64
	req := &testingv1.DoRequest{Amount: 3}
	resp, _, err := idempotency.Do(ctx, f.Idempotency, "op", "k", req, func(fctx context.Context) (*testingv1.DoResponse, error) {
		cancel()
		if _, ok := idempotency.ClaimFromContext(fctx); !ok {
			return nil, errors.New("fn's context carries no claim")
		}
		if fctx.Err() != nil {
			return nil, fctx.Err()
		}
		return numbered(&runs, req)(fctx)
	})
	if err != nil || resp.GetExecution() != 1 {
		t.Fatalf("Do: %v, %v", resp, err)
	}
	again, replayed, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", req, numbered(&runs, req))
	if err != nil || !replayed || again.GetExecution() != 1 {
		t.Fatalf("after the caller left: %v, replayed %v, %v; want the stored outcome", again, replayed, err)
	}
}

// The lease of a long fn is renewed until it returns.
func TestDoRenewsLease(t *testing.T) {
	t.Parallel()
	renewed := make(chan struct{}, 8)
	f := newFixture(t, nil, idempotency.WithOperationPolicy("op", idempotency.MethodPolicy{Lease: minLease}),
		idempotency.WithObserver(idempotency.ObserverFunc(func(_ context.Context, e idempotency.Event) {
			if e.Decision == idempotency.DecisionLeaseRenewed {
				select {
				case renewed <- struct{}{}:
				default:
				}
			}
		})))
	req := &testingv1.DoRequest{}
	var runs atomic.Int64
	_, _, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", req, func(ctx context.Context) (*testingv1.DoResponse, error) {
		for range 3 { // three renewals: the lease (100ms) ran out long ago
			<-renewed
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return numbered(&runs, req)(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, replayed, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", req, numbered(&runs, req)); err != nil || !replayed {
		t.Fatalf("second call: replayed %v, %v", replayed, err)
	}
}

// A call that finds the key in flight gets ErrKeyInUse, or with
// WithWaitForInFlight waits for the outcome and replays it.
func TestDoInFlight(t *testing.T) {
	t.Parallel()
	for _, wait := range []bool{false, true} {
		t.Run("wait="+strconv.FormatBool(wait), func(t *testing.T) {
			t.Parallel()
			var opts []idempotency.ServerOption
			if wait {
				opts = append(opts, idempotency.WithWaitForInFlight(time.Minute))
			}
			f := newFixture(t, nil, opts...)
			req := &testingv1.DoRequest{}
			var runs atomic.Int64
			started, finish := make(chan struct{}), make(chan struct{})
			done := make(chan error)
			go func() {
				_, _, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", req, func(ctx context.Context) (*testingv1.DoResponse, error) {
					close(started)
					<-finish
					return numbered(&runs, req)(ctx)
				})
				done <- err
			}()
			<-started
			if !wait {
				_, _, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", req, numbered(&runs, req))
				if !errors.Is(err, idempotency.ErrKeyInUse) || idempotency.Reason(err) != idempotency.ErrKeyInUse.Reason {
					t.Fatalf("in flight: %v, want ErrKeyInUse", err)
				}
				close(finish)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				return
			}
			second := make(chan error)
			go func() {
				resp, replayed, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", req, numbered(&runs, req))
				if err == nil && (!replayed || resp.GetExecution() != 1) {
					err = errors.New("the waiter did not replay the original's outcome")
				}
				second <- err
			}()
			waitFor(t, func() bool { return len(f.Faults.Calls()) >= 2 }) // the waiter's claim found the key in flight
			close(finish)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := <-second; err != nil {
				t.Fatal(err)
			}
			if runs.Load() != 1 {
				t.Fatalf("fn ran %d times", runs.Load())
			}
		})
	}
}

// A store that is down or full refuses the call with the library's
// sentinel, and fn does not run; failing open runs it.
func TestDoStoreFailures(t *testing.T) {
	t.Parallel()
	t.Run("unavailable", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		f.Faults.Down.Store(true)
		ran, err := idempotency.Once(t.Context(), f.Idempotency, "op", "k", nil, func(context.Context) error { return nil })
		if ran || !errors.Is(err, idempotency.ErrStoreUnavailable) || idempotency.Reason(err) != idempotency.ErrStoreUnavailable.Reason {
			t.Fatalf("ran %v, %v; want ErrStoreUnavailable", ran, err)
		}
	})
	t.Run("fail open", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil, idempotency.WithFailOpen())
		f.Faults.Down.Store(true)
		ran, err := idempotency.Once(t.Context(), f.Idempotency, "op", "k", nil, func(context.Context) error { return nil })
		if !ran || err != nil || f.Events.Count(idempotency.DecisionFailOpen) != 1 {
			t.Fatalf("ran %v, %v; want fn run without deduplication", ran, err)
		}
	})
	t.Run("full", func(t *testing.T) {
		t.Parallel()
		mem := memStore(t, memorystore.WithMaxEntries(1))
		srv := idempotency.NewServer(mem)
		if _, err := idempotency.Once(t.Context(), srv, "op", "k-1", nil, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		ran, err := idempotency.Once(t.Context(), srv, "op", "k-2", nil, func(context.Context) error { return nil })
		if ran || !errors.Is(err, idempotency.ErrStoreFull) || idempotency.Reason(err) != idempotency.ErrStoreFull.Reason {
			t.Fatalf("ran %v, %v; want ErrStoreFull", ran, err)
		}
	})
}

// A response over WithMaxResponseBytes is returned to the first call and
// not retained: a later call gets ErrResponseNotRetained, and fn does not
// run again.
func TestDoNotRetained(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithMaxResponseBytes(16))
	var runs atomic.Int64
	big := func(context.Context) (*testingv1.DoResponse, error) {
		runs.Add(1)
		return &testingv1.DoResponse{Blob: make([]byte, 64)}, nil
	}
	resp, _, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", nil, big)
	if err != nil || len(resp.GetBlob()) != 64 {
		t.Fatalf("first call: %v", err)
	}
	_, replayed, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", nil, big)
	if !replayed || !errors.Is(err, idempotency.ErrResponseNotRetained) || runs.Load() != 1 {
		t.Fatalf("second call: replayed %v, %v, fn ran %d times", replayed, err, runs.Load())
	}
}

type tenantKey struct{}

// Keys are separated by scope and by operation: another tenant's call,
// or another operation's, with the same key runs fn again.
func TestDoSeparatesScopesAndOperations(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithScope(func(ctx context.Context) (string, error) {
		return ctx.Value(tenantKey{}).(string), nil
	}))
	var runs atomic.Int64
	once := func(tenant, op string) bool {
		ctx := context.WithValue(t.Context(), tenantKey{}, tenant)
		ran, err := idempotency.Once(ctx, f.Idempotency, op, "k", nil, func(context.Context) error { runs.Add(1); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return ran
	}
	for _, c := range []struct {
		tenant, op string
		ran        bool
	}{{"a", "op1", true}, {"b", "op1", true}, {"a", "op2", true}, {"a", "op1", false}, {"b", "op2", true}, {"b", "op2", false}} {
		if got := once(c.tenant, c.op); got != c.ran {
			t.Fatalf("tenant %s, %s: ran %v, want %v", c.tenant, c.op, got, c.ran)
		}
	}
}

// A missing or malformed key is a *KeyError; an empty operation is
// ErrMisconfigured; fn does not run.
func TestDoRefusesKeys(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	for _, c := range []struct {
		op, key string
		want    error
	}{{"op", "", idempotency.ErrKeyMissing}, {"op", "a key", idempotency.ErrKeyInvalid}, {"", "k", idempotency.ErrMisconfigured}} {
		ran, err := idempotency.Once(t.Context(), f.Idempotency, c.op, c.key, nil, func(context.Context) error { return nil })
		var ke *idempotency.KeyError
		if ran || !errors.Is(err, c.want) || (c.op != "" && !errors.As(err, &ke)) {
			t.Fatalf("op %q key %q: ran %v, %v; want %v", c.op, c.key, ran, err, c.want)
		}
	}
}

// Once reports whether it ran fn: true the first time, false after, and
// a stored deterministic error to every call.
func TestOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var runs atomic.Int64
	for i := range 3 {
		ran, err := idempotency.Once(t.Context(), f.Idempotency, "consume", "msg-1", nil, func(context.Context) error { runs.Add(1); return nil })
		if err != nil || ran != (i == 0) {
			t.Fatalf("call %d: ran %v, %v", i+1, ran, err)
		}
	}
	stored := statusError(codes.FailedPrecondition, "account closed")
	for i := range 2 {
		ran, err := idempotency.Once(t.Context(), f.Idempotency, "consume", "msg-2", nil, func(context.Context) error { runs.Add(1); return stored })
		if ran != (i == 0) || status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("stored error, call %d: ran %v, %v", i+1, ran, err)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("fn ran %d times, want 2", runs.Load())
	}
}

// hookFailures are the ways the scope and fingerprint functions fail: a
// plain error (a database driver's, say) and a gRPC status with a detail.
var hookFailures = []struct {
	name        string
	scope       bool // the scope function fails; else the fingerprint function
	cause       error
	isStatus    bool
	edgeMessage string // the message the gRPC edge answers a plain error with
}{
	{"scope, plain error", true, errors.New("tenants db: connection refused"), false, "idempotency: resolving the caller's scope failed"},
	{"scope, status", true, statusError(codes.Unauthenticated, "no tenant"), true, ""},
	{"fingerprint, plain error", false, errors.New("fingerprint: unsupported field"), false, "idempotency: computing the request fingerprint failed"},
	{"fingerprint, status", false, statusError(codes.InvalidArgument, "unhashable"), true, "idempotency: computing the request fingerprint failed"},
}

// hookOption returns the option whose function fails with cause.
func hookOption(scope bool, cause error) idempotency.ServerOption {
	if scope {
		return idempotency.WithScope(func(context.Context) (string, error) { return "", cause })
	}
	return idempotency.WithFingerprint(func(string, protoMessage) ([]byte, error) { return nil, cause })
}

// Do returns the error of the scope or the fingerprint function as a Go
// error that wraps it: errors.Is finds the cause, and a gRPC status is
// found by status.FromError and status.Code as the function returned it,
// code, message and details. It is not one of the library's reasons, and
// fn does not run.
func TestDoHookErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range hookFailures {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil, hookOption(tc.scope, tc.cause))
			var runs atomic.Int64
			_, _, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", &testingv1.DoRequest{}, numbered(&runs, &testingv1.DoRequest{}))
			if !errors.Is(err, tc.cause) || runs.Load() != 0 || idempotency.Reason(err) != "" {
				t.Fatalf("Do: %v (reason %q), fn ran %d times; want the cause wrapped and fn not run", err, idempotency.Reason(err), runs.Load())
			}
			st, isStatus := status.FromError(err)
			if isStatus != tc.isStatus {
				t.Fatalf("status.FromError(%v) ok = %v, want %v", err, isStatus, tc.isStatus)
			}
			if tc.isStatus && (!proto.Equal(st.Proto(), status.Convert(tc.cause).Proto()) || status.Code(err) != status.Code(tc.cause)) {
				t.Fatalf("status of Do's error: %v, want %v", st.Proto(), status.Convert(tc.cause).Proto())
			}
			if !strings.Contains(err.Error(), tc.cause.Error()) {
				t.Fatalf("Do's error %q does not say its cause %q", err, tc.cause)
			}
		})
	}
}

// The gRPC interceptors answer the same failures as before Do wrapped
// them (decision 7): a scope function's status as it is, any other scope
// error as INTERNAL without its text, and a fingerprint function's error
// as INTERNAL without its text; the handler does not run. Unary calls and
// streams alike.
func TestInterceptorHookErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range hookFailures {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			unary := newFixture(t, nil, hookOption(tc.scope, tc.cause))
			_, uerr := unary.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
			svc, _, output := streamServer(t, memStore(t), hookOption(tc.scope, tc.cause))
			serr := output(withKey(t.Context(), "k"), 1, 8).Err
			for _, c := range []struct {
				name string
				err  error
				runs int64
			}{{"unary", uerr, unary.Service.Executions()}, {"stream", serr, svc.Executions()}} {
				want := status.New(codes.Internal, tc.edgeMessage).Proto()
				if tc.edgeMessage == "" {
					want = status.Convert(tc.cause).Proto()
				}
				if got := status.Convert(c.err).Proto(); !proto.Equal(got, want) || c.runs != 0 {
					t.Fatalf("%s: %v, handler ran %d times; want %v and no run", c.name, got, c.runs, want)
				}
			}
		})
	}
}

// A Once inside a Once of the same operation and key passes through under
// the outer claim once; a second one in the same run finds the key in
// flight, so the inner function runs once per key.
func TestNestedOnceSameKeyRunsOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var inner atomic.Int64
	var rans [2]bool
	var errs [2]error
	_, err := idempotency.Once(t.Context(), f.Idempotency, "op", "k", nil, func(ctx context.Context) error {
		for i := range rans {
			rans[i], errs[i] = idempotency.Once(ctx, f.Idempotency, "op", "k", nil, func(context.Context) error { inner.Add(1); return nil })
		}
		return nil
	})
	if err != nil {
		t.Fatalf("outer Once: %v", err)
	}
	if n := inner.Load(); n != 1 {
		t.Fatalf("inner function ran %d times under one key (ran %v, errs %v)", n, rans, errs)
	}
	if !rans[0] || errs[0] != nil || rans[1] || !errors.Is(errs[1], idempotency.ErrKeyInUse) {
		t.Fatalf("inner Once calls: ran %v, errs %v; want the first to run and the second ErrKeyInUse", rans, errs)
	}
}

// A context that carries a claim, kept past the Once that claimed it (by
// a goroutine its function started), does not let a later Once with the
// key run again: it replays the stored outcome, whether the goroutine kept
// the context as it was (ended with the work) or without its cancellation.
// After a retryable error released the key, a Once on the ended context
// returns its context error and runs nothing; one detached from the
// cancellation runs again, as any call would.
func TestClaimContextAfterOnceRunsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		keep     func(context.Context) context.Context
		released bool // the outer function failed with a retryable error
		ran      bool
		err      error
	}{
		{"kept as is", func(ctx context.Context) context.Context { return ctx }, false, false, nil},
		{"kept without cancellation", context.WithoutCancel, false, false, nil},
		{"kept as is, key released", func(ctx context.Context) context.Context { return ctx }, true, false, context.Canceled},
		{"kept without cancellation, key released", context.WithoutCancel, true, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			var kept context.Context
			var runs atomic.Int64
			_, _ = idempotency.Once(t.Context(), f.Idempotency, "op", "k", nil, func(ctx context.Context) error {
				kept = tc.keep(ctx)
				runs.Add(1)
				if tc.released {
					return status.Error(codes.Unavailable, "try again")
				}
				return nil
			})
			ran, err := idempotency.Once(kept, f.Idempotency, "op", "k", nil, func(context.Context) error { runs.Add(1); return nil })
			wantRuns := int64(1)
			if tc.ran {
				wantRuns = 2
			}
			if ran != tc.ran || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || runs.Load() != wantRuns {
				t.Fatalf("Once with the kept context after the run: ran %v, %v, runs %d; want ran %v, %v", ran, err, runs.Load(), tc.ran, tc.err)
			}
		})
	}
}

// A nested Once that the work started in a goroutine of its own is still
// running when the work returns a retryable error: the claim is released
// only once the nested call has ended, so a retry cannot run the work again
// beside it.
func TestNestedOnceOutlivingItsWork(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := memorystore.New(memorystore.WithSweepInterval(0))
		defer func() { _ = mem.Close() }()
		srv := idempotency.NewServer(mem)
		var runs atomic.Int64
		nestedStarted, finishNested := make(chan struct{}), make(chan struct{})
		nestedErr := make(chan error, 1)
		work := func(ctx context.Context) error {
			runs.Add(1)
			go func() {
				_, err := idempotency.Once(ctx, srv, "op", "k", nil, func(context.Context) error {
					close(nestedStarted)
					<-finishNested
					return nil
				})
				nestedErr <- err
			}()
			<-nestedStarted // the nested call runs under the claim, and outlives the work
			return status.Error(codes.Unavailable, "try again")
		}
		outerDone := make(chan struct{})
		go func() {
			defer close(outerDone)
			_, _ = idempotency.Once(t.Context(), srv, "op", "k", nil, work)
		}()
		synctest.Wait() // the work has returned; the nested call runs

		if ran, err := idempotency.Once(t.Context(), srv, "op", "k", nil, work); ran || !errors.Is(err, idempotency.ErrKeyInUse) {
			t.Fatalf("Once while a nested call under the claim runs: ran %v, err %v; want ErrKeyInUse", ran, err)
		}
		close(finishNested)
		<-outerDone
		if err := <-nestedErr; err != nil {
			t.Fatalf("nested Once: %v", err)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the work ran %d times while its nested call ran, want 1", n)
		}
	})
}

// A method with a namespace and a Do under that namespace are one
// operation: a Do with the method's key and request, called by its
// handler, runs under the method's claim, once, instead of finding its own
// caller's claim in flight (and, under WithWaitForInFlight, waiting for
// it). The retry replays the method's answer, and so does a Do after it.
func TestDoInsideMethodOfItsNamespace(t *testing.T) {
	t.Parallel()
	const ns = "orders.charge"
	for _, wait := range []time.Duration{0, time.Second} {
		t.Run("wait="+wait.String(), func(t *testing.T) {
			t.Parallel()
			var srv *idempotency.Server
			var inner atomic.Int64
			charge := func(context.Context) (*testingv1.DoResponse, error) {
				return &testingv1.DoResponse{Payload: "charged", Amount: inner.Add(1)}, nil
			}
			f := newFixture(t, func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				resp, replayed, err := idempotency.Do(ctx, srv, ns, "k-1", req, charge)
				if err == nil && replayed {
					err = errors.New("the nested Do replayed")
				}
				return resp, err
			}, idempotency.WithMethodPolicy(testingv1.TestService_Do_FullMethodName, idempotency.MethodPolicy{Namespace: ns}),
				idempotency.WithWaitForInFlight(wait))
			srv = f.Idempotency
			req := &testingv1.DoRequest{Payload: "p", Amount: 5}
			for n := range 2 {
				resp, err := f.Client.Do(withKey(t.Context(), "k-1"), req)
				if err != nil || resp.GetPayload() != "charged" || resp.GetExecution() != 1 {
					t.Fatalf("call %d: %v, %v; want the handler's one answer", n+1, resp, err)
				}
			}
			resp, replayed, err := idempotency.Do(t.Context(), srv, ns, "k-1", req, charge)
			if err != nil || !replayed || resp.GetExecution() != 1 {
				t.Fatalf("Do after the method: %v, replayed %v, %v; want the method's answer replayed", resp, replayed, err)
			}
			if n, h := inner.Load(), f.Service.Executions(); n != 1 || h != 1 {
				t.Fatalf("the nested Do's function ran %d times and the handler %d, want 1 and 1", n, h)
			}
		})
	}
}

// A Once nested in a Once of its operation and key, with another request,
// is refused with ErrKeyReused, as it is after the outer run: the key
// stands for the outer request. It takes nothing from the outer claim: a
// nested Once with the outer request still passes through after it.
func TestNestedOnceOtherRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a, b := &testingv1.DoRequest{Amount: 1}, &testingv1.DoRequest{Amount: 2}
	var inner atomic.Int64
	count := func(context.Context) error { inner.Add(1); return nil }
	var rans [2]bool
	var errs [2]error
	if _, err := idempotency.Once(t.Context(), f.Idempotency, "op", "k", a, func(ctx context.Context) error {
		rans[0], errs[0] = idempotency.Once(ctx, f.Idempotency, "op", "k", b, count)
		rans[1], errs[1] = idempotency.Once(ctx, f.Idempotency, "op", "k", a, count)
		return nil
	}); err != nil {
		t.Fatalf("outer Once: %v", err)
	}
	if rans[0] || !errors.Is(errs[0], idempotency.ErrKeyReused) {
		t.Fatalf("nested Once with another request: ran %v, %v; want ErrKeyReused", rans[0], errs[0])
	}
	if !rans[1] || errs[1] != nil || inner.Load() != 1 {
		t.Fatalf("nested Once with the outer request: ran %v, %v, inner runs %d; want it run once", rans[1], errs[1], inner.Load())
	}
	if ran, err := idempotency.Once(t.Context(), f.Idempotency, "op", "k", b, count); ran || !errors.Is(err, idempotency.ErrKeyReused) {
		t.Fatalf("Once with another request after the run: ran %v, %v; want ErrKeyReused", ran, err)
	}

	// Once a retryable error has released the key, a Once with another
	// request on a context kept from that run claims it as any call would.
	var kept context.Context
	_, _ = idempotency.Once(t.Context(), f.Idempotency, "op", "k2", a, func(ctx context.Context) error {
		kept = context.WithoutCancel(ctx)
		return status.Error(codes.Unavailable, "try again")
	})
	if ran, err := idempotency.Once(kept, f.Idempotency, "op", "k2", b, count); !ran || err != nil {
		t.Fatalf("Once with another request on a released key: ran %v, %v; want it run", ran, err)
	}
}

// Do[*dynamicpb.Message] replays into a dynamic message of the stored
// type, the same bytes, when the message's generated type is linked in
// too: the caller asked for a dynamic message.
func TestDoDynamicReplays(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	md := (&testingv1.DoResponse{}).ProtoReflect().Descriptor()
	var runs atomic.Int64
	fn := func(context.Context) (*dynamicpb.Message, error) {
		m := dynamicpb.NewMessage(md)
		m.Set(md.Fields().ByName("payload"), protoreflect.ValueOfString("p"))
		m.Set(md.Fields().ByName("execution"), protoreflect.ValueOfInt64(runs.Add(1)))
		return m, nil
	}
	first, _, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", nil, fn)
	if err != nil {
		t.Fatal(err)
	}
	again, replayed, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", nil, fn)
	if err != nil || !replayed || runs.Load() != 1 {
		t.Fatalf("replay: %v, replayed %v, fn ran %d times", err, replayed, runs.Load())
	}
	a, _ := proto.MarshalOptions{Deterministic: true}.Marshal(first)
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(again)
	if string(a) != string(b) || again.Descriptor().FullName() != md.FullName() {
		t.Fatalf("replayed %v (%s), want %v", again, again.Descriptor().FullName(), first)
	}
}

// A function that returns a nil message and no error answers with the
// empty message of its type, on the first call as on every replay (the
// stored bytes decode into it), as a gRPC handler's nil response reaches
// its client. A nil of no type (a nil interface, a nil dynamic message)
// cannot be stored: the first call gets it back, and a replay
// ErrResponseNotRetained, as for any outcome that cannot be kept.
func TestDoNilResponse(t *testing.T) {
	t.Parallel()
	t.Run("generated type", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		var runs atomic.Int64
		fn := func(context.Context) (*testingv1.DoResponse, error) { runs.Add(1); return nil, nil }
		for i := range 2 {
			resp, replayed, err := idempotency.Do(t.Context(), f.Idempotency, "op", "k", nil, fn)
			if err != nil || replayed != (i == 1) || resp == nil || proto.Size(resp) != 0 {
				t.Fatalf("call %d: %v, replayed %v, %v; want the empty message", i+1, resp, replayed, err)
			}
		}
		if runs.Load() != 1 {
			t.Fatalf("fn ran %d times", runs.Load())
		}
	})
	for _, tc := range []struct {
		name string
		do   func(*idempotency.Server, *atomic.Int64) (bool, bool, error) // nil answer, replayed, error
	}{
		{"nil interface", func(s *idempotency.Server, runs *atomic.Int64) (bool, bool, error) {
			resp, replayed, err := idempotency.Do(t.Context(), s, "op", "k", nil, func(context.Context) (proto.Message, error) { runs.Add(1); return nil, nil })
			return resp == nil, replayed, err
		}},
		{"nil dynamic message", func(s *idempotency.Server, runs *atomic.Int64) (bool, bool, error) {
			resp, replayed, err := idempotency.Do(t.Context(), s, "op", "k", nil, func(context.Context) (*dynamicpb.Message, error) { runs.Add(1); return nil, nil })
			return resp == nil, replayed, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			var runs atomic.Int64
			if isNil, replayed, err := tc.do(f.Idempotency, &runs); !isNil || replayed || err != nil {
				t.Fatalf("first call: nil %v, replayed %v, %v; want its nil back", isNil, replayed, err)
			}
			if _, replayed, err := tc.do(f.Idempotency, &runs); !replayed || !errors.Is(err, idempotency.ErrResponseNotRetained) {
				t.Fatalf("second call: replayed %v, %v; want ErrResponseNotRetained", replayed, err)
			}
			if runs.Load() != 1 || f.Events.Count(idempotency.DecisionNotRetained) != 1 {
				t.Fatalf("fn ran %d times, events %v", runs.Load(), f.Events.All())
			}
		})
	}
}

// A record of one message is not decoded into another by a Do under the
// same operation: Do[*BytesValue] after Do[*StringValue] is
// ErrRecordCorrupt, and the function does not run. A record whose message
// this process does not know (renamed since: here written by a server on
// another package's descriptors) still decodes into Resp, as a method's
// does under its namespace (decision 70).
func TestDoOtherResponseType(t *testing.T) {
	t.Parallel()
	old := dynamicFilesOf(t, "dyn.v1", "Payments", nil)
	charge := mustFind[protoreflect.MessageDescriptor](t, old, "dyn.v1.ChargeResponse")
	for _, tc := range []struct {
		name  string
		first func(context.Context, store.Store) error
		known bool // the first call's message is one the second call's process knows
	}{
		{"another message", func(ctx context.Context, st store.Store) error {
			_, _, err := idempotency.Do(ctx, idempotency.NewServer(st), "op", "k", nil, func(context.Context) (*wrapperspb.StringValue, error) {
				return wrapperspb.String("ch_1"), nil
			})
			return err
		}, true},
		{"a message renamed since", func(ctx context.Context, st store.Store) error {
			_, _, err := idempotency.Do(ctx, idempotency.NewServer(st, idempotency.WithDescriptors(old)), "op", "k", nil, func(context.Context) (*dynamicpb.Message, error) {
				m := dynamicpb.NewMessage(charge)
				m.Set(charge.Fields().ByName("id"), protoreflect.ValueOfString("ch_1"))
				return m, nil
			})
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := memStore(t)
			if err := tc.first(t.Context(), mem); err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int64
			resp, replayed, err := idempotency.Do(t.Context(), idempotency.NewServer(mem), "op", "k", nil, func(context.Context) (*wrapperspb.BytesValue, error) {
				runs.Add(1)
				return wrapperspb.Bytes(nil), nil
			})
			if tc.known && (!errors.Is(err, idempotency.ErrRecordCorrupt) || resp != nil || runs.Load() != 0) {
				t.Fatalf("Do[*BytesValue] on a StringValue's record: %v, %v, fn ran %d times; want ErrRecordCorrupt", resp, err, runs.Load())
			}
			if !tc.known && (err != nil || !replayed || string(resp.GetValue()) != "ch_1" || runs.Load() != 0) {
				t.Fatalf("Do[*BytesValue] on a renamed message's record: %v, replayed %v, %v, fn ran %d times; want its bytes replayed", resp, replayed, err, runs.Load())
			}
		})
	}
}
