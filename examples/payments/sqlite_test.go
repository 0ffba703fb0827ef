package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// The -sqlite mode tells the same story with the ledger and the store in
// one SQLite file, plus the chapter of a server that commits and dies
// before answering. It drops its ledger table at the end and keeps the
// store's records, so a second run on the same file tells the story again.
func TestRunTellsTheStoryOnSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "payments.db")
	for i := 1; i <= 2; i++ {
		var out bytes.Buffer
		cfg := config{SQLitePath: path, Logs: t.Output(), LogLevel: slog.LevelDebug}
		if err := run(t.Context(), cfg, &out); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out.String())
		}
		wantMarks(t, out.String(), "SQLite store and ledger")
		for _, mark := range []string{
			"A executed 1; B replayed 1",
			"the ledger holds 1 charge(s) for dave, 42.00 paid",
			"Ledger: 3 charges, 66.99 in all",
		} {
			if !strings.Contains(out.String(), mark) {
				t.Errorf("run %d: output lacks %q\n%s", i, mark, out.String())
			}
		}
	}
	db, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ledgers, records int
	if err := db.QueryRowContext(t.Context(), `SELECT
		(SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name LIKE 'payments\_demo\_%' ESCAPE '\'),
		(SELECT COUNT(*) FROM idempotency_records)`).Scan(&ledgers, &records); err != nil {
		t.Fatal(err)
	}
	if ledgers != 0 || records == 0 {
		t.Fatalf("the file holds %d ledger tables and %d records, want no ledger table and the runs' records", ledgers, records)
	}
}

func TestRunFailsWithoutSQLiteFile(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	path := filepath.Join(t.TempDir(), "no-such-dir", "payments.db")
	err := run(t.Context(), config{SQLitePath: path}, &out)
	if err == nil || !strings.Contains(err.Error(), "sqlite") {
		t.Fatalf("run = %v, want an error naming SQLite", err)
	}
}

// TestSQLiteCommitsWithoutClaim: on an optional method, a call without a
// key runs without a claim and CompleteTx returns idempotency.ErrNoClaim.
// The -sqlite service's Charge and Refund then commit their ledger writes
// without a record.
func TestSQLiteCommitsWithoutClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, err := openSQLite(ctx, filepath.Join(t.TempDir(), "payments.db"))
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
	if err := b.lite.db.QueryRowContext(ctx, `SELECT COUNT(*), SUM(amount_cents - refunded_cents),
		(SELECT COUNT(*) FROM idempotency_records) FROM `+b.lite.ledger).Scan(&charges, &paid, &records); err != nil {
		t.Fatal(err)
	}
	if charges != 1 || paid != 1499 || records != 0 {
		t.Fatalf("ledger: %d charges, %d cents paid, %d records; want 1 charge, 1499 paid, no record", charges, paid, records)
	}
}
