package main

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// TestPostgresCommitsWithoutClaim: on an optional method, a call without a
// key runs without a claim and CompleteTx returns idempotency.ErrNoClaim.
// The -postgres service's Charge and Refund then commit their ledger
// writes without a record; they used to take ErrNoClaim for a lost claim
// and roll back every such call with UNAVAILABLE.
func TestPostgresCommitsWithoutClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, err := openPostgres(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	optional := idempotency.MethodPolicy{Mode: idempotency.ModeOptional} // both are MODE_REQUIRED in the proto
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(idempotency.UnaryServerInterceptor(b.store,
		idempotency.WithMethodPolicy(paymentsv1.Payments_Charge_FullMethodName, optional),
		idempotency.WithMethodPolicy(paymentsv1.Payments_Refund_FullMethodName, optional))))
	paymentsv1.RegisterPaymentsServer(srv, b.payments(0))
	cc, err := grpc.NewClient(listen(t, srv), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	client := paymentsv1.NewPaymentsClient(cc) // no client interceptor: no key

	charged, err := client.Charge(ctx, &paymentsv1.ChargeRequest{Customer: "alice", AmountCents: 1999})
	if err != nil {
		t.Fatalf("Charge without a key: %v, want it committed", err)
	}
	if _, err := client.Refund(ctx, &paymentsv1.RefundRequest{ChargeId: charged.GetPayment().GetId(), AmountCents: 500}); err != nil {
		t.Fatalf("Refund without a key: %v, want it committed", err)
	}
	var charges, paid, records int64
	if err := b.pg.pool.QueryRow(ctx, `SELECT count(*), sum(amount_cents - refunded_cents),
		(SELECT count(*) FROM idempotency_records) FROM charges`).Scan(&charges, &paid, &records); err != nil {
		t.Fatal(err)
	}
	if charges != 1 || paid != 1499 || records != 0 {
		t.Fatalf("ledger: %d charges, %d cents paid, %d records; want 1 charge, 1499 paid, no record", charges, paid, records)
	}
}
