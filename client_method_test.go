package idempotency_test

import (
	"testing"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// WithDefaultMode(ModeDisabled) sends no key and makes no retry for
// methods whose descriptor gives no mode, while annotated methods still get
// both. The server loses the first response of every case.
func TestClientDefaultMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		opts         []idempotency.ClientOption
		method       string
		wantKeyed    bool
		wantAttempts int
	}{
		{name: "default: unannotated keyed and retried", method: "Do", wantKeyed: true, wantAttempts: 2},
		{name: "disabled: unannotated untouched", opts: []idempotency.ClientOption{idempotency.WithDefaultMode(idempotency.ModeDisabled)},
			method: "Do", wantAttempts: 1},
		{name: "disabled: MODE_REQUIRED keyed and retried", opts: []idempotency.ClientOption{idempotency.WithDefaultMode(idempotency.ModeDisabled)},
			method: "Required", wantKeyed: true, wantAttempts: 2},
		{name: "disabled: annotated without a mode keyed and retried", opts: []idempotency.ClientOption{idempotency.WithDefaultMode(idempotency.ModeDisabled)},
			method: "Tuned", wantKeyed: true, wantAttempts: 2},
		{name: "required: NO_SIDE_EFFECTS untouched", opts: []idempotency.ClientOption{idempotency.WithDefaultMode(idempotency.ModeRequired)},
			method: "Read", wantAttempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := testkit.Start(t, testkit.Config{Outer: []grpc.UnaryServerInterceptor{loseResponses(1)}})
			opts := append([]idempotency.ClientOption{idempotency.WithBackoff(noBackoff)}, tt.opts...)
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor(opts...))
			_, err := methodOf(client, tt.method)(t.Context(), &testingv1.DoRequest{Payload: "p"})
			if wantErr := tt.wantAttempts == 1; (status.Code(err) == codes.Unavailable) != wantErr {
				t.Fatalf("err = %v, want UNAVAILABLE: %v", err, wantErr)
			}
			attempts := rig.Attempts.All()
			if len(attempts) != tt.wantAttempts {
				t.Fatalf("server saw %d attempts, want %d", len(attempts), tt.wantAttempts)
			}
			if tt.wantKeyed {
				wantOneKey(t, attempts)
			} else if len(attempts[0].Keys) != 0 {
				t.Fatalf("attempt carried keys %q, want none", attempts[0].Keys)
			}
		})
	}
}

// On a method whose idempotency.v1.method option names a key_field
// (AIP-155 request_id), the client interceptor sends the field's value as
// the call's key instead of minting one, so two calls with the same
// request_id run the handler once.
func TestClientKeyFieldIsTheKey(t *testing.T) {
	t.Parallel()
	rig := testkit.Start(t, testkit.Config{})
	client := rig.ClientWith(t, idempotency.UnaryClientInterceptor())
	req := &testingv1.DoRequest{RequestId: "req-155", Payload: "p"}
	var first *testingv1.DoResponse
	for i := range 2 {
		resp, err := client.Keyed(t.Context(), req)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if first == nil {
			first = resp
		}
		if resp.GetExecution() != first.GetExecution() {
			t.Fatalf("call %d got execution %d, want the first call's %d", i+1, resp.GetExecution(), first.GetExecution())
		}
	}
	if n := rig.Service.Executions(); n != 1 {
		t.Fatalf("handler ran %d times for two calls with one request_id, want 1", n)
	}
	if key := wantOneKey(t, rig.Attempts.All()); key != req.GetRequestId() {
		t.Fatalf("calls carried key %q, want the request_id %q", key, req.GetRequestId())
	}
}

// The key field and the other key sources together: a key given with
// WithKey or in the outgoing metadata must equal a non-empty field value
// (the server would silently prefer the metadata key), an empty field
// leaves the key to the usual sources, and an invalid field value fails
// locally like any invalid key.
func TestClientKeyFieldPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		requestID  string
		opts       []grpc.CallOption
		metadata   string
		wantCode   codes.Code
		wantReason string
		wantKey    string // "" with wantCode OK: a minted key
	}{
		{name: "field alone", requestID: "r-1", wantKey: "r-1"},
		{name: "WithKey equal to the field", requestID: "r-1", opts: []grpc.CallOption{idempotency.WithKey("r-1")}, wantKey: "r-1"},
		{name: "metadata key equal to the field", requestID: "r-1", metadata: "r-1", wantKey: "r-1"},
		{name: "WithKey different from the field", requestID: "r-1", opts: []grpc.CallOption{idempotency.WithKey("other")},
			wantCode: codes.InvalidArgument, wantReason: idempotency.ErrKeyInvalid.Reason},
		{name: "metadata key different from the field", requestID: "r-1", metadata: "other",
			wantCode: codes.InvalidArgument, wantReason: idempotency.ErrKeyInvalid.Reason},
		{name: "empty field, WithKey", opts: []grpc.CallOption{idempotency.WithKey("k-1")}, wantKey: "k-1"},
		{name: "empty field, metadata key", metadata: "k-1", wantKey: "k-1"},
		{name: "empty field, minted key"},
		{name: "invalid field", requestID: "bad id", wantCode: codes.InvalidArgument, wantReason: idempotency.ErrKeyInvalid.Reason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rig := testkit.Start(t, testkit.Config{})
			client := rig.ClientWith(t, idempotency.UnaryClientInterceptor())
			ctx := t.Context()
			if tt.metadata != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, tt.metadata)
			}
			_, err := client.Keyed(ctx, &testingv1.DoRequest{RequestId: tt.requestID}, tt.opts...)
			if status.Code(err) != tt.wantCode || clientReason(err) != tt.wantReason {
				t.Fatalf("err = %v (reason %q), want %v with reason %q", err, clientReason(err), tt.wantCode, tt.wantReason)
			}
			attempts := rig.Attempts.All()
			if tt.wantCode != codes.OK {
				if len(attempts) != 0 {
					t.Fatalf("server saw %d attempts, want none: the client refuses the call", len(attempts))
				}
				return
			}
			key := wantOneKey(t, attempts)
			if tt.wantKey != "" && key != tt.wantKey {
				t.Fatalf("call carried key %q, want %q", key, tt.wantKey)
			}
			if tt.wantKey == "" && key == "" {
				t.Fatal("call carried an empty key, want a minted one")
			}
		})
	}
}

// The key field is read only on methods that name one: the same request_id
// on an unannotated method leaves each call its own minted key.
func TestClientKeyFieldOnlyWhereNamed(t *testing.T) {
	t.Parallel()
	rig := testkit.Start(t, testkit.Config{})
	client := rig.ClientWith(t, idempotency.UnaryClientInterceptor())
	for range 2 {
		if _, err := client.Do(t.Context(), &testingv1.DoRequest{RequestId: "r-1"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := rig.Service.Executions(); n != 2 {
		t.Fatalf("handler ran %d times, want 2: Do has no key_field", n)
	}
}
