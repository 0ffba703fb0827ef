package idempotency_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/testserver"
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
	first, err := f.client.Do(ctx, req, grpc.Header(&h1), grpc.Trailer(&t1))
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.client.Do(ctx, req, grpc.Header(&h2), grpc.Trailer(&t2))
	if err != nil {
		t.Fatal(err)
	}
	if n := f.srv.Service.Executions(); n != 1 {
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
	if f.events.Count(idempotency.DecisionExecuted) != 1 || f.events.Count(idempotency.DecisionReplayed) != 1 {
		t.Fatalf("events: executed %d, replayed %d, want 1 and 1",
			f.events.Count(idempotency.DecisionExecuted), f.events.Count(idempotency.DecisionReplayed))
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
				if err := tc.call(f.client, ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n := f.srv.Service.Executions(); n != 3 {
				t.Fatalf("handler ran %d times, want 3", n)
			}
			if n := len(f.store.Calls()); n != 0 {
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
				_, err = f.client.Required(ctx, &testingv1.DoRequest{})
			case "keyed":
				_, err = f.client.Keyed(ctx, &testingv1.DoRequest{})
			default:
				_, err = f.client.Do(ctx, &testingv1.DoRequest{})
			}
			wantReason(t, err, codes.InvalidArgument, tc.reason)
			if n := f.srv.Service.Executions(); n != 0 {
				t.Fatalf("handler ran %d times, want 0", n)
			}
			if n := len(f.store.Calls()); n != 0 {
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
		if _, err := f.client.Required(withKey(t.Context(), key), &testingv1.DoRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.srv.Service.Executions(); n != 1 {
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
	if _, err := f.client.Do(ctx, &testingv1.DoRequest{Amount: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := f.client.Do(ctx, &testingv1.DoRequest{Amount: 2})
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason)

	// In flight, a different request is refused the same way.
	inflight := withKey(t.Context(), "k-reuse-inflight")
	done := make(chan error, 1)
	go func() {
		_, err := f.client.Do(inflight, &testingv1.DoRequest{Payload: "slow"})
		done <- err
	}()
	f.srv.Service.WaitExecutions(t, 2)
	_, err = f.client.Do(inflight, &testingv1.DoRequest{Payload: "other"})
	wantReason(t, err, codes.FailedPrecondition, idempotency.ErrKeyReused.Reason)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := f.srv.Service.Executions(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

func TestSameKeyOtherMethodIsIndependent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := withKey(t.Context(), "k-shared")
	if _, err := f.client.Do(ctx, &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Required(ctx, &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := f.srv.Service.Executions(); n != 2 {
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
