package idempotency_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/faultstore"
	"github.com/grpc-idempotency/idempotency/internal/test/testserver"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

func TestNewKeyExecutesThenReplays(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(ctx context.Context, _ string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-charge-id", "ch_1", "x-multi", "a", "x-multi", "b"))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-ledger", "posted"))
		return &testingv1.DoResponse{Payload: req.GetPayload(), Blob: []byte{0, 1, 2}}, nil
	})
	ctx := withKey(t.Context(), "k-replay")
	req := &testingv1.DoRequest{Payload: "p", Amount: 42}

	var h1, t1, h2, t2 metadata.MD
	first, err := f.Client.Do(ctx, req, grpc.Header(&h1), grpc.Trailer(&t1))
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.Client.Do(ctx, req, grpc.Header(&h2), grpc.Trailer(&t2))
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if diff := cmp.Diff(first, second, protocmp.Transform()); diff != "" {
		t.Fatalf("replay differs (-first +replay):\n%s", diff)
	}
	b1, _ := proto.Marshal(first)
	b2, _ := proto.Marshal(second)
	if string(b1) != string(b2) {
		t.Fatalf("replay bytes %x, want %x", b2, b1)
	}
	if got := h1.Get(idempotency.ReplayedKey); len(got) != 0 {
		t.Fatalf("first answer marked replayed: %v", got)
	}
	if got := h2.Get(idempotency.ReplayedKey); len(got) != 1 || got[0] != "true" {
		t.Fatalf("replay header %s = %v, want [true]", idempotency.ReplayedKey, got)
	}
	for _, k := range []string{"x-charge-id", "x-multi"} {
		if !cmp.Equal(h1.Get(k), h2.Get(k)) || len(h1.Get(k)) == 0 {
			t.Fatalf("header %s: first %v, replay %v", k, h1.Get(k), h2.Get(k))
		}
	}
	if !cmp.Equal(t1.Get("x-ledger"), t2.Get("x-ledger")) || len(t2.Get("x-ledger")) != 1 {
		t.Fatalf("trailer x-ledger: first %v, replay %v", t1.Get("x-ledger"), t2.Get("x-ledger"))
	}
	if f.Events.Count(idempotency.DecisionExecuted) != 1 || f.Events.Count(idempotency.DecisionReplayed) != 1 {
		t.Fatalf("events: executed %d, replayed %d, want 1 and 1",
			f.Events.Count(idempotency.DecisionExecuted), f.Events.Count(idempotency.DecisionReplayed))
	}
}

func TestUntouchedMethods(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		call func(testingv1.TestServiceClient, context.Context) error
	}{
		{"no side effects", func(c testingv1.TestServiceClient, ctx context.Context) error {
			_, err := c.Read(ctx, &testingv1.DoRequest{})
			return err
		}},
		{"disabled", func(c testingv1.TestServiceClient, ctx context.Context) error {
			_, err := c.Disabled(ctx, &testingv1.DoRequest{})
			return err
		}},
		{"optional without key", func(c testingv1.TestServiceClient, _ context.Context) error {
			_, err := c.Do(context.Background(), &testingv1.DoRequest{})
			return err
		}},
		{"disabled with invalid key", func(c testingv1.TestServiceClient, _ context.Context) error {
			_, err := c.Disabled(withKey(context.Background(), "bad key"), &testingv1.DoRequest{})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			ctx := withKey(t.Context(), "same-key")
			for range 3 {
				if err := tc.call(f.Client, ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n := f.Service.Executions(); n != 3 {
				t.Fatalf("handler ran %d times, want 3", n)
			}
			if n := len(f.Faults.Calls()); n != 0 {
				t.Fatalf("store saw %d calls, want none", n)
			}
		})
	}
}

func TestKeyRefused(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		md     metadata.MD
		method string
		reason string
	}{
		{"required without key", nil, "required", idempotency.ErrKeyMissing.Reason},
		{"keyed without key or field", nil, "keyed", idempotency.ErrKeyMissing.Reason},
		{"empty", metadata.Pairs(idempotency.MetadataKey, ""), "do", idempotency.ErrKeyInvalid.Reason},
		{"256 bytes", metadata.Pairs(idempotency.MetadataKey, strings.Repeat("k", 256)), "do", idempotency.ErrKeyInvalid.Reason},
		{"space", metadata.Pairs(idempotency.MetadataKey, "a b"), "do", idempotency.ErrKeyInvalid.Reason},
		{"two keys", metadata.Pairs(idempotency.MetadataKey, "a", idempotency.MetadataKey, "b"), "do", idempotency.ErrKeyInvalid.Reason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			ctx := metadata.NewOutgoingContext(t.Context(), tc.md)
			var err error
			switch tc.method {
			case "required":
				_, err = f.Client.Required(ctx, &testingv1.DoRequest{})
			case "keyed":
				_, err = f.Client.Keyed(ctx, &testingv1.DoRequest{})
			default:
				_, err = f.Client.Do(ctx, &testingv1.DoRequest{})
			}
			wantReason(t, err, codes.InvalidArgument, tc.reason)
			if n := f.Service.Executions(); n != 0 {
				t.Fatalf("handler ran %d times, want 0", n)
			}
			if n := len(f.Faults.Calls()); n != 0 {
				t.Fatalf("store saw %d calls, want none", n)
			}
		})
	}
}

func TestKeyAtLimitAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	key := strings.Repeat("~", idempotency.MaxKeyLen-1) + "!"
	for range 2 {
		if _, err := f.Client.Required(withKey(t.Context(), key), &testingv1.DoRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestKeyReusedWithDifferentRequest(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if req.GetPayload() == "slow" {
			<-release
		}
		return testserver.Echo(ctx, m, req)
	})
	ctx := withKey(t.Context(), "k-reuse")
	if _, err := f.Client.Do(ctx, &testingv1.DoRequest{Amount: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Client.Do(ctx, &testingv1.DoRequest{Amount: 2})
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason)

	// In flight, a different request is refused the same way.
	inflight := withKey(t.Context(), "k-reuse-inflight")
	done := make(chan error, 1)
	go func() {
		_, err := f.Client.Do(inflight, &testingv1.DoRequest{Payload: "slow"})
		done <- err
	}()
	f.Service.WaitExecutions(t, 2)
	_, err = f.Client.Do(inflight, &testingv1.DoRequest{Payload: "other"})
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := f.Service.Executions(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

func TestSameKeyOtherMethodIsIndependent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := withKey(t.Context(), "k-shared")
	if _, err := f.Client.Do(ctx, &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.Required(ctx, &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := f.Service.Executions(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

// TestKeyRefusedBeforeTransport calls the interceptor directly with keys
// that grpc-go's client refuses to send but another client could.
func TestKeyRefusedBeforeTransport(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	intercept := idempotency.UnaryServerInterceptor(mem)
	info := &grpc.UnaryServerInfo{FullMethod: testingv1.TestService_Do_FullMethodName}
	for _, key := range []string{"a\tb", "a\x7fb", "clé", "a\x00b", "\xff"} {
		ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs(idempotency.MetadataKey, key))
		ran := false
		_, err := intercept(ctx, &testingv1.DoRequest{}, info, func(context.Context, any) (any, error) {
			ran = true
			return &testingv1.DoResponse{}, nil
		})
		wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyInvalid.Reason)
		if ran || strings.Contains(status.Convert(err).Message(), key) {
			t.Fatalf("key %q: ran=%v, message %q", key, ran, status.Convert(err).Message())
		}
	}
}

// TestDefaultStoredCodesCopied: a server copies DefaultStoredCodes when it
// is built, so changing the variable afterwards does not change what it
// stores. It changes a package variable, so it does not run in parallel:
// Go runs the tests that do not call t.Parallel before those that do.
func TestDefaultStoredCodesCopied(t *testing.T) {
	saved := slices.Clone(idempotency.DefaultStoredCodes)
	t.Cleanup(func() { copy(idempotency.DefaultStoredCodes, saved) })
	s := idempotency.NewServer(memStore(t))
	for i := range idempotency.DefaultStoredCodes {
		idempotency.DefaultStoredCodes[i] = codes.DataLoss
	}
	if !s.StoresError(status.Error(codes.InvalidArgument, "x")) || s.StoresError(status.Error(codes.DataLoss, "x")) {
		t.Fatal("a change to DefaultStoredCodes after NewServer changed the codes the server stores")
	}
	if !idempotency.NewServer(memStore(t)).StoresError(status.Error(codes.DataLoss, "x")) {
		t.Fatal("a server built after the change does not store its codes")
	}
}

func TestDeterministicErrorIsStoredAndReplayed(t *testing.T) {
	t.Parallel()
	for _, code := range idempotency.DefaultStoredCodes {
		t.Run(code.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(ctx context.Context, _ string, _ *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				_ = grpc.SetTrailer(ctx, metadata.Pairs("x-reason", "limit"))
				return nil, statusError(code, "amount over limit")
			})
			ctx := withKey(t.Context(), "k-err")
			var t1, t2 metadata.MD
			_, err1 := f.Client.Do(ctx, &testingv1.DoRequest{}, grpc.Trailer(&t1))
			_, err2 := f.Client.Do(ctx, &testingv1.DoRequest{}, grpc.Trailer(&t2))
			if n := f.Service.Executions(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
			s1, s2 := status.Convert(err1), status.Convert(err2)
			if s1.Code() != code || s2.Code() != code {
				t.Fatalf("codes %v, %v; want %v", s1.Code(), s2.Code(), code)
			}
			if diff := cmp.Diff(s1.Proto(), s2.Proto(), protocmp.Transform()); diff != "" {
				t.Fatalf("replayed status differs (-first +replay):\n%s", diff)
			}
			if len(s2.Details()) != 1 {
				t.Fatalf("replayed details %v, want the BadRequest", s2.Details())
			}
			if got := t2.Get(idempotency.ReplayedKey); len(got) != 1 || got[0] != "true" {
				t.Fatalf("replay trailer %v, want [true]", got)
			}
			if len(t1.Get(idempotency.ReplayedKey)) != 0 {
				t.Fatal("first error marked replayed")
			}
			if !cmp.Equal(t1.Get("x-reason"), t2.Get("x-reason")) {
				t.Fatalf("trailer x-reason: first %v, replay %v", t1.Get("x-reason"), t2.Get("x-reason"))
			}
		})
	}
}

func TestRetryableErrorReleasesClaim(t *testing.T) {
	t.Parallel()
	for _, code := range []codes.Code{codes.Unavailable, codes.Internal, codes.DeadlineExceeded, codes.Unknown, codes.Aborted} {
		t.Run(code.String(), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				if req.GetPayload() == "fail" {
					return nil, status.Error(code, "transient")
				}
				return testserver.Echo(ctx, m, req)
			})
			ctx := withKey(t.Context(), "k-transient")
			for range 2 {
				_, err := f.Client.Do(ctx, &testingv1.DoRequest{Payload: "fail"})
				if status.Code(err) != code {
					t.Fatalf("code %v, want %v", status.Code(err), code)
				}
			}
			if n := f.Service.Executions(); n != 2 {
				t.Fatalf("handler ran %d times, want 2 (claim released)", n)
			}
			if n := f.Events.Count(idempotency.DecisionReleased); n != 2 {
				t.Fatalf("released events %d, want 2", n)
			}
		})
	}
}

func TestStoredCodesConfigurable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return nil, status.Error(codes.NotFound, "gone")
	}, idempotency.WithStoredCodes(codes.ResourceExhausted))
	ctx := withKey(t.Context(), "k")
	for range 2 {
		if _, err := f.Client.Do(ctx, &testingv1.DoRequest{}); status.Code(err) != codes.NotFound {
			t.Fatalf("err %v, want NotFound", err)
		}
	}
	if n := f.Service.Executions(); n != 2 {
		t.Fatalf("handler ran %d times, want 2: NotFound is no longer stored", n)
	}
}

func TestPanicReleasesClaimAndPropagates(t *testing.T) {
	t.Parallel()
	mem := memStore(t)
	ev := &events{}
	svc := &testserver.Service{Handler: func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		if req.GetPayload() == "panic" {
			panic("boom")
		}
		return testserver.Echo(ctx, m, req)
	}}
	var recovered []any
	srv := testserver.New(t, svc, grpc.ChainUnaryInterceptor(
		recovery.UnaryServerInterceptor(recovery.WithRecoveryHandler(func(p any) error {
			recovered = append(recovered, p)
			return status.Error(codes.Internal, "recovered")
		})),
		idempotency.UnaryServerInterceptor(mem, idempotency.WithObserver(ev)),
	))
	client := srv.Client(t)
	ctx := withKey(t.Context(), "k-panic")
	_, err := client.Do(ctx, &testingv1.DoRequest{Payload: "panic"})
	if status.Code(err) != codes.Internal || len(recovered) != 1 || recovered[0] != "boom" {
		t.Fatalf("err %v, recovered %v; want the panic to reach recovery", err, recovered)
	}
	if ev.Count(idempotency.DecisionReleased) != 1 {
		t.Fatal("claim was not released after the panic")
	}
	// Same key, same request: the claim is gone, so the handler runs again.
	if _, err := client.Do(ctx, &testingv1.DoRequest{Payload: "panic"}); status.Code(err) != codes.Internal {
		t.Fatalf("retry after panic: %v, want the handler to run (and panic) again", err)
	}
	if n := svc.Executions(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	t.Run("fail closed", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil)
		f.Faults.Down.Store(true)
		_, err := f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{})
		wantReason(t, err, codes.Unavailable, idempotency.ErrStoreUnavailable.Reason)
		if msg := status.Convert(err).Message(); strings.Contains(msg, "10.0.0.1") || strings.Contains(msg, "refused") {
			t.Fatalf("message leaks backend detail: %q", msg)
		}
		if n := f.Service.Executions(); n != 0 {
			t.Fatalf("handler ran %d times, want 0", n)
		}
		if f.Events.Count(idempotency.DecisionStoreError) != 1 {
			t.Fatal("observer not told of the store error")
		}
		f.Faults.Down.Store(false)
		if _, err := f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{}); err != nil {
			t.Fatalf("after the store is back: %v", err)
		}
	})
	t.Run("fail open", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, nil, idempotency.WithFailOpen())
		f.Faults.Down.Store(true)
		for range 2 {
			if _, err := f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		if n := f.Service.Executions(); n != 2 {
			t.Fatalf("handler ran %d times, want 2 (no dedup while failing open)", n)
		}
		if n := f.Events.Count(idempotency.DecisionFailOpen); n != 2 {
			t.Fatalf("fail-open events %d, want 2", n)
		}
	})
}

func TestCorruptRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.Faults.CorruptData.Store(true)
	ctx := withKey(t.Context(), "k-corrupt")
	if _, err := f.Client.Do(ctx, &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Client.Do(ctx, &testingv1.DoRequest{})
	wantReason(t, err, codes.Internal, idempotency.ErrRecordCorrupt.Reason)
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if f.Events.Count(idempotency.DecisionRecordCorrupt) != 1 {
		t.Fatal("observer not told of the corrupt record")
	}
}

func TestResponseTooLargeIsNotRetained(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		return &testingv1.DoResponse{Blob: make([]byte, 2048)}, nil
	}, idempotency.WithMaxResponseBytes(1024))
	ctx := withKey(t.Context(), "k-large")
	resp, err := f.Client.Do(ctx, &testingv1.DoRequest{})
	if err != nil || len(resp.GetBlob()) != 2048 {
		t.Fatalf("first call: %v, blob %d bytes; want the full response", err, len(resp.GetBlob()))
	}
	var tr metadata.MD
	_, err = f.Client.Do(ctx, &testingv1.DoRequest{}, grpc.Trailer(&tr))
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrResponseNotRetained.Reason)
	if got := tr.Get(idempotency.ReplayedKey); len(got) != 1 {
		t.Fatalf("not-retained replay trailer %v, want the replay marker", got)
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestStoreFull(t *testing.T) {
	t.Parallel()
	mem := memStore(t, memorystore.WithMaxEntries(1))
	srv := testserver.New(t, &testserver.Service{}, grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(faultstore.New(mem))))
	client := srv.Client(t)
	if _, err := client.Do(withKey(t.Context(), "k1"), &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := client.Do(withKey(t.Context(), "k2"), &testingv1.DoRequest{})
	wantReason(t, err, codes.ResourceExhausted, idempotency.ErrStoreFull.Reason)
	// The stored key still replays.
	if _, err := client.Do(withKey(t.Context(), "k1"), &testingv1.DoRequest{}); err != nil {
		t.Fatalf("replay in a full store: %v", err)
	}
	if n := srv.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func TestCompleteRetriedThroughStoreBlip(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.Faults.FailCompletes(2)
	ctx := withKey(t.Context(), "k-blip")
	for range 2 {
		if _, err := f.Client.Do(ctx, &testingv1.DoRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times, want 1: the outcome was stored on the third try", n)
	}
	if n := f.Faults.Count("complete"); n != 3 {
		t.Fatalf("complete calls %d, want 3", n)
	}
}

// TestPanicWhileSettlingEndsRenewal: a panic after the handler returned
// and before its outcome is stored (here the observer, on the not-retained
// outcome of a response over the size limit) reaches the recovery
// interceptor, and renewal ends with the call: the claim's lease runs out
// as after a crash instead of being renewed for as long as the process
// lives.
func TestPanicWhileSettlingEndsRenewal(t *testing.T) {
	t.Parallel()
	const lease = 150 * time.Millisecond
	mem := memStore(t)
	fs := faultstore.New(mem)
	svc := &testserver.Service{Handler: func(ctx context.Context, m string, req *testingv1.DoRequest) (*testingv1.DoResponse, error) {
		time.Sleep(lease) // long enough to be renewed
		return testserver.Echo(ctx, m, req)
	}}
	panicky := idempotency.ObserverFunc(func(_ context.Context, e idempotency.Event) {
		if e.Decision == idempotency.DecisionNotRetained {
			panic("observer")
		}
	})
	srv := testserver.New(t, svc, grpc.ChainUnaryInterceptor(
		recovery.UnaryServerInterceptor(recovery.WithRecoveryHandler(func(any) error {
			return status.Error(codes.Internal, "recovered")
		})),
		idempotency.UnaryServerInterceptor(fs, idempotency.WithLease(lease),
			idempotency.WithMaxResponseBytes(1), idempotency.WithObserver(panicky)),
	))
	ctx := withKey(t.Context(), "k-settle-panic")
	if _, err := srv.Client(t).Do(ctx, &testingv1.DoRequest{Payload: "a response over one byte"}); status.Code(err) != codes.Internal {
		t.Fatalf("call: %v, want the observer's panic recovered", err)
	}
	if fs.Count("extend") == 0 {
		t.Fatal("the claim was never renewed: the test does not show renewal ending")
	}
	time.Sleep(lease)
	before := fs.Count("extend")
	time.Sleep(2 * lease)
	if after := fs.Count("extend"); after != before {
		t.Fatalf("%d renewals in %v after the call ended, want none", after-before, 2*lease)
	}
}
