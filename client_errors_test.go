package idempotency_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

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
