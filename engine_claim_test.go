package idempotency_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store"
)

// Two idempotency interceptors chained over one call (a platform-wide
// chain and a service's own, or a selector): over the same store with the
// same scope, the inner one recognises the claim the outer one took for
// this call and passes it through, so the handler runs once and the call
// succeeds, and its retry replays, also when the two compute fingerprints
// with different functions (the request is the same). Over different stores (comparable or
// not) or with different scopes, each claims and stores its own record.
func TestNestedInterceptors(t *testing.T) {
	t.Parallel()
	tenant := idempotency.WithScope(func(context.Context) (string, error) { return "tenant-1", nil })
	otherFingerprint := idempotency.WithFingerprint(func(string, protoMessage) ([]byte, error) { return []byte("the inner server's"), nil })
	uncomparable := func(s store.Store) store.Store { return uncomparableStore{Store: s} }
	tests := []struct {
		name      string
		wrap      func(store.Store) store.Store // of both stores; nil: none
		innerB    bool                          // the inner interceptor uses the second store
		innerOpts []idempotency.ServerOption
		// Claims and completes in each store after the call and its retry.
		wantClaims, wantCompletes [2]int
	}{
		{name: "same store", wantClaims: [2]int{2, 0}, wantCompletes: [2]int{1, 0}},
		{name: "different stores", innerB: true, wantClaims: [2]int{2, 1}, wantCompletes: [2]int{1, 1}},
		{name: "uncomparable stores", wrap: uncomparable, innerB: true, wantClaims: [2]int{2, 1}, wantCompletes: [2]int{1, 1}},
		{name: "different scopes", innerOpts: []idempotency.ServerOption{tenant}, wantClaims: [2]int{3, 0}, wantCompletes: [2]int{2, 0}},
		{name: "different fingerprint functions", innerOpts: []idempotency.ServerOption{otherFingerprint}, wantClaims: [2]int{2, 0}, wantCompletes: [2]int{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fss := [2]*faultstore.Store{faultstore.New(memStore(t)), faultstore.New(memStore(t))}
			stores := [2]store.Store{fss[0], fss[1]}
			if tt.wrap != nil {
				stores = [2]store.Store{tt.wrap(fss[0]), tt.wrap(fss[1])}
			}
			outer, inner := stores[0], stores[0]
			if tt.innerB {
				inner = stores[1]
			}
			claims := make(chan bool, 2)
			srv := testserver.New(t, &testserver.Service{Handler: func(ctx context.Context, method string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				_, ok := idempotency.ClaimFromContext(ctx)
				claims <- ok
				return testserver.Echo(ctx, method, req)
			}}, grpc.ChainUnaryInterceptor(
				idempotency.UnaryServerInterceptor(outer),
				idempotency.UnaryServerInterceptor(inner, tt.innerOpts...)))
			client := srv.Client(t)
			for n := range 2 {
				resp, err := client.Do(withKey(t.Context(), "k-1"), &testingv1.DoRequest{Payload: "p"})
				if err != nil || resp.GetExecution() != 1 {
					t.Fatalf("call %d = %v, %v; want execution 1", n+1, resp, err)
				}
			}
			if ok := <-claims; !ok {
				t.Fatal("the handler ran without a claim")
			}
			if n := srv.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
			for s, fs := range fss {
				if got := [2]int{fs.Count("claim"), fs.Count("complete")}; got != [2]int{tt.wantClaims[s], tt.wantCompletes[s]} {
					t.Fatalf("store %c: %d claims and %d completes, want %d and %d",
						'a'+s, got[0], got[1], tt.wantClaims[s], tt.wantCompletes[s])
				}
			}
		})
	}
}

// uncomparableStore is a store value whose dynamic type cannot be compared
// with ==: comparing two of them as store.Store values panics.
type uncomparableStore struct {
	store.Store
	_ []int
}

// blockingHandler blocks every call until release is closed and reports
// each start on started.
func blockingHandler(started chan<- struct{}, release <-chan struct{}) testserver.HandlerFunc {
	return func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		started <- struct{}{}
		<-release
		return testserver.Echo(ctx, m, req)
	}
}

func TestInFlightDuplicateIsAborted(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	f := newFixture(t, blockingHandler(started, release), idempotency.WithRetryAfter(750*time.Millisecond))
	ctx := withKey(t.Context(), "k-inflight")
	done := make(chan error, 1)
	go func() {
		_, err := f.Client.Do(ctx, &testingv1.DoRequest{})
		done <- err
	}()
	<-started

	var hdr, tr metadata.MD
	_, err := f.Client.Do(ctx, &testingv1.DoRequest{}, grpc.Header(&hdr), grpc.Trailer(&tr))
	wantReason(t, err, codes.Aborted, idempotency.ErrKeyInUse.Reason)
	_, ri := errorInfo(err)
	if ri.GetRetryDelay().AsDuration() != 750*time.Millisecond {
		t.Fatalf("RetryInfo %v, want 750ms", ri)
	}
	if got := tr.Get("grpc-retry-pushback-ms"); !cmp.Equal(got, []string{"750"}) {
		t.Fatalf("pushback trailer %v, want [750]", got)
	}
	if len(hdr) != 0 {
		t.Fatalf("rejection sent headers %v; metadata on errors goes in trailers", hdr)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.Events.Count(idempotency.DecisionInFlight) != 1 {
		t.Fatal("observer not told of the in-flight rejection")
	}
}

func TestWaitForInFlightReplaysOriginal(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	f := newFixture(t, blockingHandler(started, release), idempotency.WithWaitForInFlight(time.Minute))
	ctx := withKey(t.Context(), "k-wait")
	type result struct {
		resp *testingv1.DoResponse
		hdr  metadata.MD
		err  error
	}
	call := func(out chan<- result) {
		var hdr metadata.MD
		resp, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "x"}, grpc.Header(&hdr))
		out <- result{resp, hdr, err}
	}
	first := make(chan result, 1)
	go call(first)
	<-started

	const waiters = 5
	dups := make(chan result, waiters)
	for range waiters {
		go call(dups)
	}
	// Every waiter has claimed once and found the key in flight.
	waitFor(t, func() bool { return f.Faults.Count("claim") == 1+waiters })
	close(release)

	orig := <-first
	if orig.err != nil {
		t.Fatal(orig.err)
	}
	for range waiters {
		d := <-dups
		if d.err != nil {
			t.Fatal(d.err)
		}
		if !proto.Equal(d.resp, orig.resp) {
			t.Fatalf("waiter got %v, want the original %v", d.resp, orig.resp)
		}
		if got := d.hdr.Get(idempotency.ReplayedKey); len(got) != 1 {
			t.Fatal("waiter's answer not marked replayed")
		}
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	// Woken by the owner, not by polling: one claim to find the key in
	// flight and one after the wake-up, per waiter.
	if n := f.Faults.Count("claim"); n != 1+2*waiters {
		t.Fatalf("claims = %d, want %d (no polling among same-process waiters)", n, 1+2*waiters)
	}
}

func TestWaitForInFlightBoundedByDeadline(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	f := newFixture(t, blockingHandler(started, release), idempotency.WithWaitForInFlight(time.Hour))
	ctx := withKey(t.Context(), "k-wait-deadline")
	done := make(chan error, 1)
	go func() {
		_, err := f.Client.Do(ctx, &testingv1.DoRequest{})
		done <- err
	}()
	<-started
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := f.Client.Do(short, &testingv1.DoRequest{})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("waiter past its deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestWaitForInFlightGivesUpWithAborted(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	f := newFixture(t, blockingHandler(started, release), idempotency.WithWaitForInFlight(30*time.Millisecond))
	ctx := withKey(t.Context(), "k-wait-short")
	done := make(chan error, 1)
	go func() {
		_, err := f.Client.Do(ctx, &testingv1.DoRequest{})
		done <- err
	}()
	<-started
	_, err := f.Client.Do(ctx, &testingv1.DoRequest{})
	wantReason(t, err, codes.Aborted, idempotency.ErrKeyInUse.Reason)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestExactlyOnceUnderConcurrency sends one key and request from 64
// goroutines at once: the handler runs once, and every caller gets the
// identical answer or ABORTED with IDEMPOTENCY_KEY_IN_USE.
func TestExactlyOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	for _, wait := range []time.Duration{0, time.Minute} {
		t.Run("wait="+wait.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				time.Sleep(20 * time.Millisecond)
				return testserver.Echo(ctx, m, req)
			}, idempotency.WithWaitForInFlight(wait))
			const callers = 64
			ctx := withKey(t.Context(), "k-64-"+strconv.Itoa(int(wait)))
			var (
				wg      sync.WaitGroup
				start   = make(chan struct{})
				mu      sync.Mutex
				answers [][]byte
				aborted int
			)
			for range callers {
				wg.Go(func() {
					<-start
					resp, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "same"})
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						ei, _ := errorInfo(err)
						if status.Code(err) != codes.Aborted || ei.GetReason() != idempotency.ErrKeyInUse.Reason {
							t.Errorf("unexpected error %v", err)
						}
						aborted++
						return
					}
					b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
					answers = append(answers, b)
				})
			}
			close(start)
			wg.Wait()
			if n := f.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want exactly 1", n)
			}
			if len(answers)+aborted != callers || len(answers) == 0 {
				t.Fatalf("%d answers and %d aborted of %d callers", len(answers), aborted, callers)
			}
			if wait > 0 && aborted != 0 {
				t.Fatalf("%d callers aborted while waiting was on", aborted)
			}
			for _, a := range answers[1:] {
				if string(a) != string(answers[0]) {
					t.Fatalf("answers differ: %x vs %x", a, answers[0])
				}
			}
		})
	}
}

func TestClaimFromContext(t *testing.T) {
	t.Parallel()
	claims := make(chan idempotency.Claim, 2)
	f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		c, ok := idempotency.ClaimFromContext(ctx)
		if ok {
			claims <- c
		}
		return testserver.Echo(ctx, m, req)
	})
	if _, err := f.Client.Do(withKey(t.Context(), "k-claim"), &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.Do(t.Context(), &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 {
		t.Fatalf("%d handlers saw a claim, want 1 (only the keyed call)", len(claims))
	}
	c := <-claims
	if c.StoreKey == "" || c.Token == "" || c.StoreKey == "k-claim" {
		t.Fatalf("claim %+v: want a hashed key and a token", c)
	}
}
