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

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
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
