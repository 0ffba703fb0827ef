package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
)

// TestContextWithKey: the key lands once in the outgoing metadata; keys the
// server would refuse, and a context that already carries another key or
// two, are refused locally with ErrKeyInvalid.Reason and ctx unchanged.
func TestContextWithKey(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		existing []string // keys already in the outgoing metadata
		key      string
		wantErr  bool
	}{
		"new key":                 {nil, "order-1", false},
		"same key already there":  {[]string{"order-1"}, "order-1", false},
		"other key already there": {[]string{"order-2"}, "order-1", true},
		"two keys already there":  {[]string{"order-1", "order-1"}, "order-1", true},
		"empty":                   {nil, "", true},
		"too long":                {nil, strings.Repeat("k", idempotency.MaxKeyLen+1), true},
		"space":                   {nil, "order 1", true},
		"non-ASCII":               {nil, "ordér-1", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			for _, k := range tc.existing {
				ctx = metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, k)
			}
			got, err := idempotency.ContextWithKey(ctx, tc.key)
			if tc.wantErr {
				var ke *idempotency.KeyError
				if !errors.As(err, &ke) || idempotency.Reason(err) != idempotency.ErrKeyInvalid.Reason {
					t.Fatalf("err = %v, want a KeyError with %s", err, idempotency.ErrKeyInvalid.Reason)
				}
				if got != ctx {
					t.Fatal("the context changed on an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if md := metadata.ValueFromOutgoingContext(got, idempotency.MetadataKey); len(md) != 1 || md[0] != tc.key {
				t.Fatalf("outgoing keys = %q, want [%q]", md, tc.key)
			}
		})
	}
}

// TestContextWithKeyOverServer: over a real server, a client without the
// client interceptor gets deduplication from ContextWithKey, while WithKey
// sends nothing on such a connection (the REQUIRED method answers
// KEY_MISSING, an optional one runs every call); with the interceptor, the
// context's key is the one used.
func TestContextWithKeyOverServer(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ interceptor bool }{
		"plain client":         {false},
		"with the interceptor": {true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rig := newClientRig(t, rigConfig{})
			var client testingv1.TestServiceClient
			if tc.interceptor {
				client = rig.client(t, idempotency.UnaryClientInterceptor())
			} else {
				client = rig.client(t)
			}
			ctx, err := idempotency.ContextWithKey(t.Context(), "order-1042-payment")
			if err != nil {
				t.Fatal(err)
			}
			for i, wantReplayed := range []bool{false, true} {
				var header metadata.MD
				resp, err := client.Required(ctx, &testingv1.DoRequest{Amount: 42}, grpc.Header(&header))
				if err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if resp.GetExecution() != 1 || (len(header.Get(idempotency.ReplayedKey)) == 1) != wantReplayed {
					t.Fatalf("call %d: execution %d, replayed %q", i+1, resp.GetExecution(), header.Get(idempotency.ReplayedKey))
				}
			}
			for _, a := range rig.attempts.all() {
				if len(a.keys) != 1 || a.keys[0] != "order-1042-payment" {
					t.Fatalf("the server saw keys %q, want the context's key", a.keys)
				}
			}
			if !tc.interceptor {
				_, err := client.Required(t.Context(), &testingv1.DoRequest{Amount: 42}, idempotency.WithKey("order-1043-payment"))
				wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyMissing.Reason)
				// An optional method runs each such call, with no deduplication.
				before := rig.executions()
				for range 2 {
					if _, err := client.Do(t.Context(), &testingv1.DoRequest{Amount: 42}, idempotency.WithKey("order-1044-payment")); err != nil {
						t.Fatal(err)
					}
				}
				if n := rig.executions() - before; n != 2 {
					t.Fatalf("an optional method called twice with WithKey on a plain client ran %d times, want 2 (no key sent)", n)
				}
			}
		})
	}
}
