package main

import (
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
)

func TestLedger(t *testing.T) {
	t.Parallel()
	l := NewLedger()
	c, paid, err := l.Charge("kim", 1000)
	if err != nil || c.ID != "ch_1" || paid != 1000 {
		t.Fatalf("Charge = %+v, %d, %v", c, paid, err)
	}
	tests := []struct {
		name   string
		id     string
		amount int64
		want   error
	}{
		{name: "unknown charge", id: "ch_9", amount: 1, want: errNoSuchCharge},
		{name: "malformed id", id: "x", amount: 1, want: errNoSuchCharge},
		{name: "zero amount", id: "ch_1", amount: 0, want: errInvalidAmount},
		{name: "more than charged", id: "ch_1", amount: 1001, want: errOverRefunded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, _, err := l.Refund(tt.id, tt.amount); !errors.Is(err, tt.want) {
				t.Fatalf("Refund = %v, want %v", err, tt.want)
			}
		})
	}
}

// A refund's deterministic error is stored and replayed: a retry after the
// charge was refunded elsewhere still gets the original answer.
func TestRefundOutcomeReplays(t *testing.T) {
	t.Parallel()
	r := startRig(t, nil)
	pc := paymentsv1.NewPaymentsClient(r.conn(t, tokenA))
	ch, err := pc.Charge(withKey(t.Context(), "k-charge"), &paymentsv1.ChargeRequest{Customer: "lee", AmountCents: 1000})
	if err != nil {
		t.Fatal(err)
	}
	id := ch.GetPayment().GetId()
	refund := &paymentsv1.RefundRequest{ChargeId: id, AmountCents: 600}
	first, err := pc.Refund(withKey(t.Context(), "k-refund-1"), refund)
	if err != nil || first.GetCustomerTotalCents() != 400 {
		t.Fatalf("refund = %v, %v; want 4.00 left paid", first, err)
	}
	again, err := pc.Refund(withKey(t.Context(), "k-refund-1"), refund)
	if err != nil || again.GetPayment().GetRefundedCents() != 600 {
		t.Fatalf("retried refund = %v, %v; want the replay, 6.00 refunded once", again, err)
	}
	var trailer metadata.MD
	_, err = pc.Refund(withKey(t.Context(), "k-refund-2"), refund)
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second refund = %v, want FAILED_PRECONDITION", err)
	}
	_, err = pc.Refund(withKey(t.Context(), "k-refund-2"), refund, grpc.Trailer(&trailer))
	if status.Code(err) != codes.FailedPrecondition || !replayed(trailer) {
		t.Fatalf("retried second refund = %v (replayed %t), want the stored FAILED_PRECONDITION", err, replayed(trailer))
	}
	if p := r.ledger.Paid("lee"); p != 400 {
		t.Fatalf("lee paid %s, want 4.00", money(p))
	}
}
