package main

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
)

// paymentsService serves payments.v1.Payments from a [Ledger]. It knows
// nothing about idempotency: the interceptor in front of it does.
type paymentsService struct {
	paymentsv1.UnimplementedPaymentsServer
	ledger *Ledger
	// latency stands in for the card network: Charge takes this long, which
	// is what lets concurrent duplicates overlap.
	latency time.Duration
}

// Charge charges a customer.
func (s *paymentsService) Charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.ChargeResponse, error) {
	if req.GetCustomer() == "" {
		return nil, status.Error(codes.InvalidArgument, "customer is required")
	}
	if err := sleep(ctx, s.latency); err != nil {
		return nil, err
	}
	c, paid, err := s.ledger.Charge(req.GetCustomer(), req.GetAmountCents())
	if err != nil {
		return nil, statusOf(err)
	}
	return &paymentsv1.ChargeResponse{Payment: paymentOf(c), CustomerTotalCents: paid}, nil
}

// Refund refunds part of a charge.
func (s *paymentsService) Refund(_ context.Context, req *paymentsv1.RefundRequest) (*paymentsv1.RefundResponse, error) {
	c, paid, err := s.ledger.Refund(req.GetChargeId(), req.GetAmountCents())
	if err != nil {
		return nil, statusOf(err)
	}
	return &paymentsv1.RefundResponse{Payment: paymentOf(c), CustomerTotalCents: paid}, nil
}

// GetCharge reads a charge.
func (s *paymentsService) GetCharge(_ context.Context, req *paymentsv1.GetChargeRequest) (*paymentsv1.GetChargeResponse, error) {
	c, ok := s.ledger.Get(req.GetChargeId())
	if !ok {
		return nil, statusOf(errNoSuchCharge)
	}
	return &paymentsv1.GetChargeResponse{Payment: paymentOf(c)}, nil
}

func paymentOf(c charge) *paymentsv1.Payment {
	return &paymentsv1.Payment{Id: c.ID, Customer: c.Customer, AmountCents: c.Amount, RefundedCents: c.Refunded}
}

// statusOf maps ledger errors to gRPC statuses. All of them are
// deterministic, so the interceptor stores and replays them.
func statusOf(err error) error {
	switch {
	case errors.Is(err, errNoSuchCharge):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, errOverRefunded):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, errInvalidAmount):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, "ledger failure")
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}
