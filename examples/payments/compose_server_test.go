package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
)

// withKey returns ctx carrying key in the idempotency metadata, as a client
// without the key interceptor would send it.
func withKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, idempotency.MetadataKey, key)
}

func replayed(md metadata.MD) bool { return slices.Contains(md.Get(idempotency.ReplayedKey), "true") }

// The principal from the auth step scopes keys: tenant B sending tenant A's
// key gets a charge of its own, never A's stored answer.
func TestScopeKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	r := startRig(t, nil)
	a := paymentsv1.NewPaymentsClient(r.conn(t, tokenA))
	b := paymentsv1.NewPaymentsClient(r.conn(t, tokenB))
	req := &paymentsv1.ChargeRequest{Customer: "dave", AmountCents: 700}
	ctx := withKey(t.Context(), "shared-key")

	first, err := a.Charge(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var hdr metadata.MD
	other, err := b.Charge(ctx, req, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if replayed(hdr) || other.GetPayment().GetId() == first.GetPayment().GetId() {
		t.Fatalf("tenant B got %s (replayed %t), want its own charge, not A's %s", other.GetPayment().GetId(), replayed(hdr), first.GetPayment().GetId())
	}
	again, err := a.Charge(ctx, req, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if !replayed(hdr) || again.GetPayment().GetId() != first.GetPayment().GetId() {
		t.Fatalf("tenant A's retry got %s (replayed %t), want its replayed %s", again.GetPayment().GetId(), replayed(hdr), first.GetPayment().GetId())
	}
	if n := r.ledger.ChargesOf("dave"); n != 2 {
		t.Fatalf("ledger holds %d charges, want 2: one per tenant", n)
	}
}

// The selector applies idempotency to payments.v1.Payments only: the health
// service answers afresh to the same key, while Payments replays.
func TestSelectorLeavesOtherServicesAlone(t *testing.T) {
	t.Parallel()
	r := startRig(t, nil)
	cc := r.conn(t, tokenA)
	ctx := withKey(t.Context(), "k-health")
	hc := healthpb.NewHealthClient(cc)

	r.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	r.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	var hdr metadata.MD
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING || replayed(hdr) {
		t.Fatalf("health = %v (replayed %t), want the fresh NOT_SERVING", resp.GetStatus(), replayed(hdr))
	}
	if n := r.meter.decisions(healthpb.Health_Check_FullMethodName, idempotency.DecisionExecuted) +
		r.meter.decisions(healthpb.Health_Check_FullMethodName, idempotency.DecisionReplayed); n != 0 {
		t.Fatalf("%d idempotency decisions for the health service, want 0", n)
	}

	// The same key on Payments is deduplicated: the selector does select.
	pc := paymentsv1.NewPaymentsClient(cc)
	req := &paymentsv1.ChargeRequest{Customer: "erin", AmountCents: 100}
	for range 2 {
		if _, err := pc.Charge(ctx, req, grpc.Header(&hdr)); err != nil {
			t.Fatal(err)
		}
	}
	if !replayed(hdr) || r.ledger.ChargesOf("erin") != 1 {
		t.Fatalf("Payments: replayed %t, %d charges; want a replay and 1 charge", replayed(hdr), r.ledger.ChargesOf("erin"))
	}
}

// panicOnce panics on its first Charge, as a bug in a handler would.
type panicOnce struct {
	*paymentsService
	panicked bool
}

func (p *panicOnce) Charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.ChargeResponse, error) {
	if !p.panicked {
		p.panicked = true
		panic("card network client bug")
	}
	return p.paymentsService.Charge(ctx, req)
}

// Recovery sits outside: a panic becomes INTERNAL, the server lives on, and
// the claim was released so a retry with the same key runs the handler.
func TestRecoveryOutsideIdempotency(t *testing.T) {
	t.Parallel()
	r := startRig(t, func(c *serverConfig) {
		c.payments = &panicOnce{paymentsService: c.payments.(*paymentsService)}
	})
	pc := paymentsv1.NewPaymentsClient(r.conn(t, tokenA))
	ctx := withKey(t.Context(), "k-panic")
	req := &paymentsv1.ChargeRequest{Customer: "frank", AmountCents: 300}

	_, err := pc.Charge(ctx, req)
	if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "card network") {
		t.Fatalf("first call = %v, want INTERNAL without the panic text", err)
	}
	var hdr metadata.MD
	if _, err := pc.Charge(ctx, req, grpc.Header(&hdr)); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if replayed(hdr) || r.ledger.ChargesOf("frank") != 1 {
		t.Fatalf("retry replayed %t, %d charges; want a fresh run and 1 charge", replayed(hdr), r.ledger.ChargesOf("frank"))
	}
	if n := r.meter.decisions(chargeMethod, idempotency.DecisionReleased); n != 1 {
		t.Fatalf("%d released decisions, want 1", n)
	}
	if !strings.Contains(r.logs.String(), "recovered from panic") {
		t.Fatalf("the panic was not logged:\n%s", r.logs)
	}
}

// Auth runs before idempotency: refused callers never reach the store.
func TestAuthBeforeIdempotency(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		token     string
		anonymous bool
		want      codes.Code
	}{
		{name: "no token", want: codes.Unauthenticated},
		{name: "unknown token", token: "stolen", want: codes.Unauthenticated},
		{name: "unknown token with anonymous allowed", token: "stolen", anonymous: true, want: codes.Unauthenticated},
		{name: "no token with anonymous allowed", anonymous: true, want: codes.OK},
		{name: "known token", token: tokenA, want: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := startRig(t, func(c *serverConfig) { c.auth.allowAnonymous = tt.anonymous })
			cc, err := dialNoToken(r.addr, tt.token)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cc.Close() })
			_, err = paymentsv1.NewPaymentsClient(cc).Charge(withKey(t.Context(), "k-auth"), &paymentsv1.ChargeRequest{Customer: "gina", AmountCents: 1})
			if got := status.Code(err); got != tt.want {
				t.Fatalf("code = %v (%v), want %v", got, err, tt.want)
			}
			wantDecisions := uint64(0)
			if tt.want == codes.OK {
				wantDecisions = 1
			}
			if n := r.meter.decisions(chargeMethod, idempotency.DecisionExecuted); n != wantDecisions {
				t.Fatalf("%d executed decisions, want %d", n, wantDecisions)
			}
		})
	}
}

// Every decision is logged through slog with its outcome and principal,
// and every call by go-grpc-middleware's logging interceptor.
func TestLogsDecisionsAndCalls(t *testing.T) {
	t.Parallel()
	r := startRig(t, nil)
	pc := paymentsv1.NewPaymentsClient(r.conn(t, tokenB))
	ctx := withKey(t.Context(), "k-log")
	for range 2 {
		if _, err := pc.Charge(ctx, &paymentsv1.ChargeRequest{Customer: "hal", AmountCents: 5}); err != nil {
			t.Fatal(err)
		}
	}
	logs := r.logs.String()
	for _, want := range []string{
		`msg="idempotency decision" method=/payments.v1.Payments/Charge outcome=executed`,
		`msg="idempotency decision" method=/payments.v1.Payments/Charge outcome=replayed`,
		"principal=" + tenantB,
		`msg="finished call"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q", want)
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs)
	}
}
