package idempotency_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
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
			rig := newClientRig(t, rigConfig{fault: loseResponses(1)})
			opts := append([]idempotency.ClientOption{idempotency.WithBackoff(noBackoff)}, tt.opts...)
			client := rig.client(t, idempotency.UnaryClientInterceptor(opts...))
			_, err := methodOf(client, tt.method)(t.Context(), &testingv1.DoRequest{Payload: "p"})
			if wantErr := tt.wantAttempts == 1; (status.Code(err) == codes.Unavailable) != wantErr {
				t.Fatalf("err = %v, want UNAVAILABLE: %v", err, wantErr)
			}
			attempts := rig.attempts.all()
			if len(attempts) != tt.wantAttempts {
				t.Fatalf("server saw %d attempts, want %d", len(attempts), tt.wantAttempts)
			}
			if tt.wantKeyed {
				wantOneKey(t, attempts)
			} else if len(attempts[0].keys) != 0 {
				t.Fatalf("attempt carried keys %q, want none", attempts[0].keys)
			}
		})
	}
}
