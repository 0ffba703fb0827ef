package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

func TestReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	_, inUse := f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "a"})
	if inUse != nil {
		t.Fatal(inUse)
	}
	_, reused := f.Client.Do(withKey(t.Context(), "k"), &testingv1.DoRequest{Payload: "b"})
	_, missing := f.Client.Required(t.Context(), &testingv1.DoRequest{})
	cases := map[string]struct {
		err  error
		want string
	}{
		"nil":                    {nil, ""},
		"plain error":            {errors.New("x"), ""},
		"status without details": {status.Error(codes.Aborted, "x"), ""},
		"sentinel":               {idempotency.ErrKeyInUse, idempotency.ErrKeyInUse.Reason},
		"wrapped sentinel":       {fmt.Errorf("ctx: %w", idempotency.ErrStoreFull), idempotency.ErrStoreFull.Reason},
		"reused over the wire":   {reused, idempotency.ErrKeyReused.Reason},
		"missing over the wire":  {missing, idempotency.ErrKeyMissing.Reason},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := idempotency.Reason(tc.err); got != tc.want {
				t.Fatalf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// TestStoreUnavailablePushback: a store that is down answers UNAVAILABLE
// with a RetryInfo and a grpc-retry-pushback-ms trailer, so clients back
// off instead of hammering it.
func TestStoreUnavailablePushback(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, idempotency.WithRetryAfter(1500*time.Millisecond))
	f.Faults.Down.Store(true)
	var tr metadata.MD
	_, err := f.Client.Do(withKey(context.Background(), "k-down"), &testingv1.DoRequest{}, grpc.Trailer(&tr))
	wantReason(t, err, codes.Unavailable, idempotency.ErrStoreUnavailable.Reason)
	_, ri := errorInfo(err)
	if ri.GetRetryDelay().AsDuration() != 1500*time.Millisecond {
		t.Fatalf("RetryInfo %v, want 1.5s", ri)
	}
	if got := tr.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != "1500" {
		t.Fatalf("pushback trailer %q, want 1500", got)
	}
}

// wantSentinelStatus fails the test unless err, returned by a client
// interceptor, matches sentinel with errors.Is (or matches none when
// sentinel is nil) and is still the gRPC status it was: the same code,
// message, details and text, found by status.FromError, and errors.Is
// finds that status too.
func wantSentinelStatus(t *testing.T, err error, sentinel error, code codes.Code) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Fatalf("err = %v, want a status error with code %v", err, code)
	}
	if err.Error() != st.Err().Error() || !errors.Is(err, st.Err()) {
		t.Fatalf("err %q does not read as its status %q", err, st.Err())
	}
	for _, s := range []error{idempotency.ErrKeyReused, idempotency.ErrKeyInvalid, idempotency.ErrKeyInUse, idempotency.ErrStoreFull} {
		if got, want := errors.Is(err, s), s == sentinel; got != want {
			t.Fatalf("errors.Is(%v, %v) = %v, want %v", err, s, got, want)
		}
	}
	if sentinel != nil && idempotency.Reason(err) != sentinel.(*idempotency.Error).Reason {
		t.Fatalf("Reason(%v) = %q, want %q", err, idempotency.Reason(err), sentinel.(*idempotency.Error).Reason)
	}
}

// TestClientErrorIsSentinel: an error the client interceptors return that
// carries this library's ErrorInfo matches its sentinel with errors.Is,
// and reads as the status it is (status.FromError, status.Code, its text
// and details unchanged); a key the client refuses is a *KeyError too;
// another domain's ErrorInfo matches no sentinel.
func TestClientErrorIsSentinel(t *testing.T) {
	t.Parallel()
	t.Run("ReusedOverTheWire", func(t *testing.T) {
		t.Parallel()
		client := testkit.Start(t, testkit.Config{}).ClientWith(t, idempotency.UnaryClientInterceptor())
		if _, err := client.Do(t.Context(), &testingv1.DoRequest{Payload: "a"}, idempotency.WithKey("k")); err != nil {
			t.Fatal(err)
		}
		_, err := client.Do(t.Context(), &testingv1.DoRequest{Payload: "b"}, idempotency.WithKey("k"))
		wantSentinelStatus(t, err, idempotency.ErrKeyReused, codes.FailedPrecondition)
	})
	t.Run("RefusedByTheClient", func(t *testing.T) {
		t.Parallel()
		client := testkit.Start(t, testkit.Config{}).ClientWith(t, idempotency.UnaryClientInterceptor())
		_, err := client.Do(t.Context(), &testingv1.DoRequest{}, idempotency.WithKey("bad key"))
		wantSentinelStatus(t, err, idempotency.ErrKeyInvalid, codes.InvalidArgument)
		if ke, ok := errors.AsType[*idempotency.KeyError](err); !ok || ke.Err != idempotency.ErrKeyInvalid {
			t.Fatalf("err = %v, want a *KeyError of ErrKeyInvalid", err)
		}
	})
	for _, tt := range []struct {
		name     string
		method   string
		domain   string
		sentinel error
	}{
		{"InUse", "Do", idempotency.ErrorDomain, idempotency.ErrKeyInUse},
		{"UnkeyedMethod", "Disabled", idempotency.ErrorDomain, idempotency.ErrKeyInUse},
		{"OtherDomain", "Do", "payments.example.com", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := errorWith(codes.Aborted, tt.domain, idempotency.ErrKeyInUse.Reason, 0)
			rig := testkit.Start(t, testkit.Config{Outer: []grpc.UnaryServerInterceptor{func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
				return nil, want
			}}})
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(idempotency.WithoutRetry()))
			_, err := methodOf(client, tt.method)(t.Context(), &testingv1.DoRequest{})
			wantSentinelStatus(t, err, tt.sentinel, codes.Aborted)
			if !proto.Equal(status.Convert(err).Proto(), status.Convert(want).Proto()) {
				t.Fatalf("status %v, want %v", status.Convert(err).Proto(), status.Convert(want).Proto())
			}
		})
	}
	t.Run("ServerStream", func(t *testing.T) {
		t.Parallel()
		r := newStreamRig(t)
		if _, _, err := download(t.Context(), r.client, &testingv1.DoRequest{Amount: 1}, idempotency.WithKey("k")); err != nil {
			t.Fatal(err)
		}
		_, _, err := download(t.Context(), r.client, &testingv1.DoRequest{Amount: 2}, idempotency.WithKey("k"))
		wantSentinelStatus(t, err, idempotency.ErrKeyReused, codes.FailedPrecondition)
	})
	t.Run("ClientStream", func(t *testing.T) {
		t.Parallel()
		r := newStreamRig(t)
		if _, err := upload(t.Context(), r.client, []int64{1}, idempotency.WithKey("k")); err != nil {
			t.Fatal(err)
		}
		_, err := upload(t.Context(), r.client, []int64{2}, idempotency.WithKey("k"))
		wantSentinelStatus(t, err, idempotency.ErrKeyReused, codes.FailedPrecondition)
	})
}
