package idempotency_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/internal/faultstore"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

// fnFixture is a Server for Do and Once over a memory store wrapped in a
// fault store, with an observer.
type fnFixture struct {
	srv    *idempotency.Server
	store  *faultstore.Store
	events *events
}

func newFnFixture(t *testing.T, opts ...idempotency.ServerOption) *fnFixture {
	t.Helper()
	fs := faultstore.New(memStore(t))
	ev := &events{}
	opts = append([]idempotency.ServerOption{idempotency.WithObserver(ev)}, opts...)
	return &fnFixture{srv: idempotency.NewServer(fs, opts...), store: fs, events: ev}
}

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
	f := newFnFixture(t)
	req := &testingv1.DoRequest{Payload: "p", Amount: 7}
	var runs atomic.Int64
	first, replayed, err := idempotency.Do(t.Context(), f.srv, "op", "k", req, numbered(&runs, req))
	if err != nil || replayed {
		t.Fatalf("first call: replayed %v, %v", replayed, err)
	}
	again, replayed, err := idempotency.Do(t.Context(), f.srv, "op", "k", req, numbered(&runs, req))
	if err != nil || !replayed {
		t.Fatalf("second call: replayed %v, %v; want a replay", replayed, err)
	}
	if diff := cmp.Diff(first, again, protocmp.Transform()); diff != "" {
		t.Fatalf("replay differs (-first +replay):\n%s", diff)
	}
	if runs.Load() != 1 || f.events.Count(idempotency.DecisionExecuted) != 1 || f.events.Count(idempotency.DecisionReplayed) != 1 {
		t.Fatalf("runs %d, events %v", runs.Load(), f.events.All())
	}
	if m := f.events.All()[0].Method; m != "op" {
		t.Fatalf("event method %q, want the operation", m)
	}
}

// The same key with another request is ErrKeyReused; the key's own
// request still replays; a nil request fingerprints the operation alone.
func TestDoKeyReused(t *testing.T) {
	t.Parallel()
	f := newFnFixture(t)
	var runs atomic.Int64
	a, b := &testingv1.DoRequest{Amount: 1}, &testingv1.DoRequest{Amount: 2}
	if _, _, err := idempotency.Do(t.Context(), f.srv, "op", "k", a, numbered(&runs, a)); err != nil {
		t.Fatal(err)
	}
	_, _, err := idempotency.Do(t.Context(), f.srv, "op", "k", b, numbered(&runs, b))
	if !errors.Is(err, idempotency.ErrKeyReused) || idempotency.Reason(err) != idempotency.ErrKeyReused.Reason {
		t.Fatalf("other request: %v (reason %q), want ErrKeyReused", err, idempotency.Reason(err))
	}
	if f.events.Count(idempotency.DecisionKeyReused) != 1 {
		t.Fatalf("events %v, want one key_reused", f.events.All())
	}
	for i := range 2 {
		ran, err := idempotency.Once(t.Context(), f.srv, "op-nil", "k", nil, func(context.Context) error { return nil })
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
			f := newFnFixture(t)
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
					_, replays[i], errs[i] = idempotency.Do(t.Context(), f.srv, "op", "k", &testingv1.DoRequest{}, fn)
				}()
			}
			if n := runs.Load(); n != tc.runsWant {
				t.Fatalf("fn ran %d times, want %d", n, tc.runsWant)
			}
			if tc.runsWant == 1 {
				if !replays[1] || !proto.Equal(status.Convert(errs[1]).Proto(), status.Convert(stored).Proto()) {
					t.Fatalf("second call: replayed %v, %v; want the stored status %v", replays[1], errs[1], stored)
				}
			} else if n := f.events.Count(idempotency.DecisionReleased); n != 2 {
				t.Fatalf("%d releases, want 2", n)
			}
		})
	}
}

// fn runs on, on a context that carries the claim and is not cancelled,
// when the caller's context ends; its outcome is stored and replayed.
func TestDoCallerLeaves(t *testing.T) {
	t.Parallel()
	f := newFnFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	var runs atomic.Int64
	req := &testingv1.DoRequest{Amount: 3}
	resp, _, err := idempotency.Do(ctx, f.srv, "op", "k", req, func(fctx context.Context) (*testingv1.DoResponse, error) {
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
	again, replayed, err := idempotency.Do(t.Context(), f.srv, "op", "k", req, numbered(&runs, req))
	if err != nil || !replayed || again.GetExecution() != 1 {
		t.Fatalf("after the caller left: %v, replayed %v, %v; want the stored outcome", again, replayed, err)
	}
}

// The lease of a long fn is renewed until it returns.
func TestDoRenewsLease(t *testing.T) {
	t.Parallel()
	renewed := make(chan struct{}, 8)
	f := newFnFixture(t, idempotency.WithOperationPolicy("op", idempotency.MethodPolicy{Lease: minLease}),
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
	_, _, err := idempotency.Do(t.Context(), f.srv, "op", "k", req, func(ctx context.Context) (*testingv1.DoResponse, error) {
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
	if _, replayed, err := idempotency.Do(t.Context(), f.srv, "op", "k", req, numbered(&runs, req)); err != nil || !replayed {
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
			f := newFnFixture(t, opts...)
			req := &testingv1.DoRequest{}
			var runs atomic.Int64
			started, finish := make(chan struct{}), make(chan struct{})
			done := make(chan error)
			go func() {
				_, _, err := idempotency.Do(t.Context(), f.srv, "op", "k", req, func(ctx context.Context) (*testingv1.DoResponse, error) {
					close(started)
					<-finish
					return numbered(&runs, req)(ctx)
				})
				done <- err
			}()
			<-started
			if !wait {
				_, _, err := idempotency.Do(t.Context(), f.srv, "op", "k", req, numbered(&runs, req))
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
				resp, replayed, err := idempotency.Do(t.Context(), f.srv, "op", "k", req, numbered(&runs, req))
				if err == nil && (!replayed || resp.GetExecution() != 1) {
					err = errors.New("the waiter did not replay the original's outcome")
				}
				second <- err
			}()
			waitFor(t, func() bool { return len(f.store.Calls()) >= 2 }) // the waiter's claim found the key in flight
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
		f := newFnFixture(t)
		f.store.Down.Store(true)
		ran, err := idempotency.Once(t.Context(), f.srv, "op", "k", nil, func(context.Context) error { return nil })
		if ran || !errors.Is(err, idempotency.ErrStoreUnavailable) || idempotency.Reason(err) != idempotency.ErrStoreUnavailable.Reason {
			t.Fatalf("ran %v, %v; want ErrStoreUnavailable", ran, err)
		}
	})
	t.Run("fail open", func(t *testing.T) {
		t.Parallel()
		f := newFnFixture(t, idempotency.WithFailOpen())
		f.store.Down.Store(true)
		ran, err := idempotency.Once(t.Context(), f.srv, "op", "k", nil, func(context.Context) error { return nil })
		if !ran || err != nil || f.events.Count(idempotency.DecisionFailOpen) != 1 {
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
	f := newFnFixture(t, idempotency.WithMaxResponseBytes(16))
	var runs atomic.Int64
	big := func(context.Context) (*testingv1.DoResponse, error) {
		runs.Add(1)
		return &testingv1.DoResponse{Blob: make([]byte, 64)}, nil
	}
	resp, _, err := idempotency.Do(t.Context(), f.srv, "op", "k", nil, big)
	if err != nil || len(resp.GetBlob()) != 64 {
		t.Fatalf("first call: %v", err)
	}
	_, replayed, err := idempotency.Do(t.Context(), f.srv, "op", "k", nil, big)
	if !replayed || !errors.Is(err, idempotency.ErrResponseNotRetained) || runs.Load() != 1 {
		t.Fatalf("second call: replayed %v, %v, fn ran %d times", replayed, err, runs.Load())
	}
}

type tenantKey struct{}

// Keys are separated by scope and by operation: another tenant's call,
// or another operation's, with the same key runs fn again.
func TestDoSeparatesScopesAndOperations(t *testing.T) {
	t.Parallel()
	f := newFnFixture(t, idempotency.WithScope(func(ctx context.Context) (string, error) {
		return ctx.Value(tenantKey{}).(string), nil
	}))
	var runs atomic.Int64
	once := func(tenant, op string) bool {
		ctx := context.WithValue(t.Context(), tenantKey{}, tenant)
		ran, err := idempotency.Once(ctx, f.srv, op, "k", nil, func(context.Context) error { runs.Add(1); return nil })
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
	f := newFnFixture(t)
	for _, c := range []struct {
		op, key string
		want    error
	}{{"op", "", idempotency.ErrKeyMissing}, {"op", "a key", idempotency.ErrKeyInvalid}, {"", "k", idempotency.ErrMisconfigured}} {
		ran, err := idempotency.Once(t.Context(), f.srv, c.op, c.key, nil, func(context.Context) error { return nil })
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
	f := newFnFixture(t)
	var runs atomic.Int64
	for i := range 3 {
		ran, err := idempotency.Once(t.Context(), f.srv, "consume", "msg-1", nil, func(context.Context) error { runs.Add(1); return nil })
		if err != nil || ran != (i == 0) {
			t.Fatalf("call %d: ran %v, %v", i+1, ran, err)
		}
	}
	stored := statusError(codes.FailedPrecondition, "account closed")
	for i := range 2 {
		ran, err := idempotency.Once(t.Context(), f.srv, "consume", "msg-2", nil, func(context.Context) error { runs.Add(1); return stored })
		if ran != (i == 0) || status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("stored error, call %d: ran %v, %v", i+1, ran, err)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("fn ran %d times, want 2", runs.Load())
	}
}
