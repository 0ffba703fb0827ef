package main

import (
	"testing"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
)

// Client chains against a network that loses two responses. With the key
// set once above every retry, the customer is charged once and the last
// answer is a replay; with the key interceptor below go-grpc-middleware's
// retry, each attempt gets a fresh key and charges again.
func TestClientChains(t *testing.T) {
	t.Parallel()
	mwRetry := func() grpc.UnaryClientInterceptor {
		return retry.UnaryClientInterceptor(
			retry.WithMax(5),
			retry.WithCodes(codes.Unavailable),
			retry.WithBackoff(retry.BackoffLinear(0)),
		)
	}
	keyOnly := func() grpc.UnaryClientInterceptor {
		return idempotency.UnaryClientInterceptor(idempotency.WithoutRetry())
	}
	tests := []struct {
		name        string
		chain       []grpc.UnaryClientInterceptor
		wantCharges int
	}{
		{
			name:        "all-in-one client interceptor",
			chain:       []grpc.UnaryClientInterceptor{idempotency.UnaryClientInterceptor(idempotency.WithBackoff(nil))},
			wantCharges: 1,
		},
		{
			name:        "key interceptor before go-grpc-middleware retry",
			chain:       []grpc.UnaryClientInterceptor{keyOnly(), mwRetry()},
			wantCharges: 1,
		},
		{
			name:        "key interceptor after go-grpc-middleware retry: a key per attempt",
			chain:       []grpc.UnaryClientInterceptor{mwRetry(), keyOnly()},
			wantCharges: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := startRig(t, nil)
			pc := paymentsv1.NewPaymentsClient(r.conn(t, tokenA, tt.chain...))
			r.network.loseNext(2)
			var hdr metadata.MD
			resp, err := pc.Charge(t.Context(), &paymentsv1.ChargeRequest{Customer: "ivy", AmountCents: 4200}, grpc.Header(&hdr))
			if err != nil {
				t.Fatal(err)
			}
			if n := r.meter.attempts(chargeMethod); n != 3 {
				t.Fatalf("%d attempts, want 3: two lost, one answered", n)
			}
			if n := r.ledger.ChargesOf("ivy"); n != tt.wantCharges {
				t.Fatalf("%d charges, want %d", n, tt.wantCharges)
			}
			if tt.wantCharges == 1 && (!replayed(hdr) || resp.GetPayment().GetId() != "ch_1") {
				t.Fatalf("got %s, replayed %t; want ch_1 replayed", resp.GetPayment().GetId(), replayed(hdr))
			}
		})
	}
}

// Without the idempotency interceptor the same lost response and retry
// charge twice: the ledger really needs the library.
func TestWithoutTheLibraryTheLedgerChargesTwice(t *testing.T) {
	t.Parallel()
	ledger := NewLedger()
	network := &lossyNetwork{}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(network.intercept))
	paymentsv1.RegisterPaymentsServer(srv, &paymentsService{ledger: ledger})
	addr := listen(t, srv)
	m := newMeter()
	cc, err := dial(addr, tokenA, m, nil, retry.UnaryClientInterceptor(retry.WithMax(3), retry.WithCodes(codes.Unavailable), retry.WithBackoff(retry.BackoffLinear(0))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })

	network.loseNext(1)
	if _, err := paymentsv1.NewPaymentsClient(cc).Charge(t.Context(), &paymentsv1.ChargeRequest{Customer: "jack", AmountCents: 1000}); err != nil {
		t.Fatal(err)
	}
	if n, paid := ledger.ChargesOf("jack"), ledger.Paid("jack"); n != 2 || paid != 2000 {
		t.Fatalf("%d charges, %s paid; want the double charge, 2 and 20.00", n, money(paid))
	}
}
