package gatewayidempotency_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/gatewayidempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
)

// TestAbandonedBlocked (decision 299): a key whose claim was abandoned,
// under AbandonBlock, is answered as httpidempotency answers it: 423
// Locked, the problem type ProblemTypeOutcomeUnknown with reason
// IDEMPOTENCY_OUTCOME_UNKNOWN, no Retry-After and no replay header. The
// call reached the server, whose handler never ran; the key stays
// abandoned.
func TestAbandonedBlocked(t *testing.T) {
	t.Parallel()
	const method = "/idempotency.testing.v1.TestService/Required"
	g := newGateway(t, setup{server: []idempotency.ServerOption{idempotency.WithAbandonedClaims(idempotency.AbandonBlock)}})
	sk := testkit.Abandon(t, g.store, g.idem, method, method, "k", &testingv1.DoRequest{Payload: "charge", Amount: 1999})
	for range 2 {
		r := g.post(t, required, charge, "k")
		var p problem
		if err := json.Unmarshal([]byte(r.Body), &p); err != nil {
			t.Fatalf("body %q is not JSON: %v", r.Body, err)
		}
		if r.Status != http.StatusLocked || p.Status != http.StatusLocked || p.Title != "Locked" ||
			p.Type != gatewayidempotency.ProblemTypeOutcomeUnknown || p.Reason != idempotency.ErrOutcomeUnknown.Reason ||
			p.Detail != idempotency.ErrOutcomeUnknown.Error() {
			t.Fatalf("got %d %s, want 423 with the outcome-unknown problem", r.Status, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); ct != gatewayidempotency.ProblemContentType {
			t.Fatalf("Content-Type %q", ct)
		}
		for _, h := range []string{"Retry-After", gatewayidempotency.ReplayedHeader} {
			if v, ok := r.Header[h]; ok {
				t.Fatalf("%s: %q on a blocked key's answer", h, v)
			}
		}
	}
	if n := g.calls.Load(); n != 2 {
		t.Fatalf("%d gRPC calls reached the server, want 2", n)
	}
	if n := g.srv.Service.Executions(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
	testkit.WantState(t, g.store, sk, store.StateAbandoned)
}
