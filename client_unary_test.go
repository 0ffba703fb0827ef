package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
)

func TestClientKeySources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		method string   // "Do" when empty
		md     []string // outgoing metadata values under idempotency-key
		opts   []grpc.CallOption
		want   string // "" means a fresh UUIDv4
	}{
		{name: "minted"},
		{name: "WithKey", opts: []grpc.CallOption{idempotency.WithKey("k-call")}, want: "k-call"},
		{name: "metadata", md: []string{"k-md"}, want: "k-md"},
		{name: "metadata and the same WithKey", md: []string{"k-same"}, opts: []grpc.CallOption{idempotency.WithKey("k-same")}, want: "k-same"},
		{name: "last WithKey wins", opts: []grpc.CallOption{idempotency.WithKey("k-1"), idempotency.WithKey("k-2")}, want: "k-2"},
		{name: "REQUIRED method", method: "Required"},
		{name: "tuned method", method: "Tuned", opts: []grpc.CallOption{idempotency.WithKey("k-tuned")}, want: "k-tuned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := testkit.Start(t, testkit.Config{})
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor())
			ctx := t.Context()
			for _, k := range tt.md {
				ctx = metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, k)
			}
			if _, err := methodOf(client, tt.method)(ctx, &testingv1.DoRequest{Payload: "p"}, tt.opts...); err != nil {
				t.Fatal(err)
			}
			got := wantOneKey(t, rig.Attempts.All())
			switch {
			case tt.want != "" && got != tt.want:
				t.Fatalf("server saw key %q, want %q", got, tt.want)
			case tt.want == "":
				if u, err := uuid.Parse(got); err != nil || u.Version() != 4 {
					t.Fatalf("minted key %q is not a UUIDv4 (%v)", got, err)
				}
			}
		})
	}
}

func TestClientKeyRefusedLocally(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		md   []string
		opts []grpc.CallOption
		cfg  []idempotency.ClientOption
	}{
		{name: "WithKey with a space", opts: []grpc.CallOption{idempotency.WithKey("bad key")}},
		{name: "empty WithKey", opts: []grpc.CallOption{idempotency.WithKey("")}},
		{name: "WithKey too long", opts: []grpc.CallOption{idempotency.WithKey(strings.Repeat("k", idempotency.MaxKeyLen+1))}},
		{name: "metadata with a control byte", md: []string{"k\x01"}},
		{name: "two keys in metadata", md: []string{"k-1", "k-2"}},
		{name: "WithKey differs from metadata", md: []string{"k-md"}, opts: []grpc.CallOption{idempotency.WithKey("k-call")}},
		{name: "generator mints a bad key", cfg: []idempotency.ClientOption{idempotency.WithKeyGenerator(func() string { return "bad key" })}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := testkit.Start(t, testkit.Config{})
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(tt.cfg...))
			ctx := t.Context()
			for _, k := range tt.md {
				ctx = metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, k)
			}
			_, err := client.Do(ctx, &testingv1.DoRequest{}, tt.opts...)
			if status.Code(err) != codes.InvalidArgument || clientReason(err) != idempotency.ErrKeyInvalid.Reason {
				t.Fatalf("err = %v, want INVALID_ARGUMENT with %s", err, idempotency.ErrKeyInvalid.Reason)
			}
			if n := len(rig.Attempts.All()); n != 0 {
				t.Fatalf("the server saw %d attempts, want none", n)
			}
		})
	}
}

func TestClientKeyMintedOncePerCall(t *testing.T) {
	t.Parallel()
	rig := testkit.Start(t, testkit.Config{Outer: []grpc.UnaryServerInterceptor{loseResponses(2)}})
	var minted atomic.Int64
	gen := func() string { minted.Add(1); return uuid.NewString() }
	client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(idempotency.WithKeyGenerator(gen), idempotency.WithBackoff(noBackoff)))

	if _, err := client.Do(t.Context(), &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	first := rig.Attempts.All()
	if len(first) != 3 {
		t.Fatalf("server saw %d attempts, want 3 (two lost responses, then the replay)", len(first))
	}
	key := wantOneKey(t, first)
	if minted.Load() != 1 {
		t.Fatalf("generator called %d times for one call, want 1", minted.Load())
	}

	if _, err := client.Do(t.Context(), &testingv1.DoRequest{}); err != nil {
		t.Fatal(err)
	}
	second := rig.Attempts.All()[3:]
	if minted.Load() != 2 || wantOneKey(t, second) == key {
		t.Fatalf("a second call reused the key or minted %d keys in all, want a new key", minted.Load())
	}
}

// Methods with no side effects and DISABLED methods get no key and no
// retries, even when they fail with UNAVAILABLE.
func TestClientUntouchedMethods(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"Read", "Disabled"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			unavailable := func(context.Context, string, *testingv1.DoRequest) (*testingv1.DoResponse, error) {
				return nil, status.Error(codes.Unavailable, "down")
			}
			rig := testkit.Start(t, testkit.Config{Handler: unavailable})
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(idempotency.WithBackoff(noBackoff)))
			call := methodOf(client, method)
			for range 2 { // the second call hits the per-method cache
				_, err := call(t.Context(), &testingv1.DoRequest{}, idempotency.WithKey("k-ignored"))
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("err = %v, want UNAVAILABLE", err)
				}
			}
			attempts := rig.Attempts.All()
			if len(attempts) != 2 || rig.Service.Executions() != 2 {
				t.Fatalf("server saw %d attempts and %d executions for 2 calls, want 2 and 2", len(attempts), rig.Service.Executions())
			}
			for _, a := range attempts {
				if len(a.Keys) != 0 {
					t.Fatalf("%s carried keys %q, want none", a.Method, a.Keys)
				}
			}
		})
	}
}

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
			rig := testkit.Start(t, testkit.Config{})
			var client testingv1.TestServiceClient
			if tc.interceptor {
				client = rig.ClientWith(t, idempotency.UnaryClientInterceptor())
			} else {
				client = rig.ClientWith(t)
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
			for _, a := range rig.Attempts.All() {
				if len(a.Keys) != 1 || a.Keys[0] != "order-1042-payment" {
					t.Fatalf("the server saw keys %q, want the context's key", a.Keys)
				}
			}
			if !tc.interceptor {
				_, err := client.Required(t.Context(), &testingv1.DoRequest{Amount: 42}, idempotency.WithKey("order-1043-payment"))
				wantReason(t, err, codes.InvalidArgument, idempotency.ErrKeyMissing.Reason)
				// An optional method runs each such call, with no deduplication.
				before := rig.Service.Executions()
				for range 2 {
					if _, err := client.Do(t.Context(), &testingv1.DoRequest{Amount: 42}, idempotency.WithKey("order-1044-payment")); err != nil {
						t.Fatal(err)
					}
				}
				if n := rig.Service.Executions() - before; n != 2 {
					t.Fatalf("an optional method called twice with WithKey on a plain client ran %d times, want 2 (no key sent)", n)
				}
			}
		})
	}
}
