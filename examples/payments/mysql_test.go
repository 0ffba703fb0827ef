package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// The -mysql mode tells the same story with the ledger and the store in
// MySQL (MariaDB here), plus the chapter of a server that commits and dies
// before answering, and leaves nothing behind on the server.
func TestRunTellsTheStoryOnMySQL(t *testing.T) {
	t.Parallel()
	dsn := mysqltest.DSN(t)
	var out bytes.Buffer
	cfg := config{MySQLDSN: dsn, Logs: t.Output(), LogLevel: slog.LevelDebug}
	if err := run(t.Context(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wantMarks(t, out.String(), "MySQL store and ledger")
	for _, mark := range []string{
		"A executed 1; B replayed 1",
		"the ledger holds 1 charge(s) for dave, 42.00 paid",
		"Ledger: 3 charges, 66.99 in all",
	} {
		if !strings.Contains(out.String(), mark) {
			t.Errorf("output lacks %q\n%s", mark, out.String())
		}
	}
	var databases int
	err := mysqltest.DB(t, 1).QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name LIKE 'payments\\_demo\\_%'").Scan(&databases)
	if err != nil || databases != 0 {
		t.Fatalf("%d demo databases left on the server (%v), want 0", databases, err)
	}
}

func TestRunFailsWithoutMySQL(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run(t.Context(), config{MySQLDSN: "root@tcp(127.0.0.1:1)/?timeout=2s"}, &out)
	if err == nil || !strings.Contains(err.Error(), "mysql") {
		t.Fatalf("run = %v, want an error naming MySQL", err)
	}
}

// TestMySQLCommitsWithoutClaim: on an optional method, a call without a
// key runs without a claim and CompleteTx returns idempotency.ErrNoClaim.
// The -mysql service's Charge and Refund then commit their ledger writes
// without a record.
func TestMySQLCommitsWithoutClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, err := openMySQL(ctx, mysqltest.DSN(t))
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
	if err := b.my.db.QueryRowContext(ctx, `SELECT COUNT(*), SUM(amount_cents - refunded_cents),
		(SELECT COUNT(*) FROM idempotency_records) FROM charges`).Scan(&charges, &paid, &records); err != nil {
		t.Fatal(err)
	}
	if charges != 1 || paid != 1499 || records != 0 {
		t.Fatalf("ledger: %d charges, %d cents paid, %d records; want 1 charge, 1499 paid, no record", charges, paid, records)
	}
}
