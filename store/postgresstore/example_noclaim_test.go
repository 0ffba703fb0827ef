package postgresstore_test

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// TestExampleCommitsWithoutClaim: on an optional method, a call without a
// key runs without a claim, and CompleteTx and CompleteErrorTx return
// idempotency.ErrNoClaim. The example's Charge (and its decline) then
// commit their ledger rows without a record; they used to take ErrNoClaim
// for a lost claim and roll back every such call with UNAVAILABLE.
func TestExampleCommitsWithoutClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := pgtest.Config(t, 4)
	cfg.ConnConfig.RuntimeParams["search_path"] = newSchema(t, pgtest.Pool(t, 1))
	db := pgtest.PoolFrom(t, cfg)
	s := postgresstore.New(db)
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := createLedger(ctx, db); err != nil {
		t.Fatal(err)
	}

	// Charge is MODE_REQUIRED in its proto; the policy makes it optional.
	srv := grpc.NewServer(grpc.UnaryInterceptor(idempotency.UnaryServerInterceptor(s,
		idempotency.WithMethodPolicy(paymentsv1.Payments_Charge_FullMethodName,
			idempotency.MethodPolicy{Mode: idempotency.ModeOptional}))))
	paymentsv1.RegisterPaymentsServer(srv, &payments{db: db, store: s})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := paymentsv1.NewPaymentsClient(conn) // no client interceptor: no key

	cases := []struct {
		name   string
		amount int64
		code   codes.Code
	}{
		{"charge", 1999, codes.OK},
		{"decline", 250_000, codes.FailedPrecondition},
	}
	for _, c := range cases {
		_, err := client.Charge(ctx, &paymentsv1.ChargeRequest{Customer: "alice", AmountCents: c.amount})
		if status.Code(err) != c.code {
			t.Fatalf("%s without a key: %v, want %s", c.name, err, c.code)
		}
	}
	var charges, declines, records int
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM charges), (SELECT count(*) FROM declines),
		(SELECT count(*) FROM idempotency_records)`).Scan(&charges, &declines, &records); err != nil {
		t.Fatal(err)
	}
	if charges != 1 || declines != 1 || records != 0 {
		t.Fatalf("ledger: %d charges, %d declines, %d records; want 1, 1 and no record", charges, declines, records)
	}
}
