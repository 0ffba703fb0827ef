package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver of sql.Open
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// payments keeps its ledger in MySQL and records each Charge's answer in
// the transaction that writes the charge.
type payments struct {
	paymentsv1.UnimplementedPaymentsServer
	db    *sql.DB
	store *mysqlstore.Store
}

// Charge charges a customer once per idempotency key: the charge and its
// recorded answer commit together, or neither does.
func (p *payments) Charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.ChargeResponse, error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	if req.GetAmountCents() > 100_000 {
		return p.decline(ctx, tx, req)
	}

	res, err := tx.ExecContext(ctx, "INSERT INTO charges (customer, amount_cents) VALUES (?, ?)",
		req.GetCustomer(), req.GetAmountCents())
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	id, _ := res.LastInsertId()
	resp := &paymentsv1.ChargeResponse{Payment: &paymentsv1.Payment{
		Id: fmt.Sprintf("ch_%d", id), Customer: req.GetCustomer(), AmountCents: req.GetAmountCents(),
	}}
	// The answer, in the same transaction, fenced by the call's claim.
	switch err := p.store.CompleteTx(ctx, tx, resp); {
	case errors.Is(err, idempotency.ErrNoClaim):
		// A call without a claim (no key on an optional method, a
		// disabled method, fail-open): nothing to record. Commit as
		// without this store.
	case err != nil:
		// The claim was lost (store.ErrLeaseLost), or InnoDB rolled the
		// transaction back (a deadlock): roll back (deferred) and let
		// the client retry.
		return nil, status.Error(codes.Unavailable, "claim lost: rolled back")
	}
	if err := tx.Commit(); err != nil {
		// Maybe committed, maybe not. A retryable error releases the
		// claim, which keeps a committed record: the retry replays it.
		return nil, status.Error(codes.Unavailable, "commit failed")
	}
	return resp, nil
}

// decline writes a declined card to the ledger and records its answer,
// FAILED_PRECONDITION, in the same transaction.
func (p *payments) decline(ctx context.Context, tx *sql.Tx, req *paymentsv1.ChargeRequest) (*paymentsv1.ChargeResponse, error) {
	declined := status.Error(codes.FailedPrecondition, "card declined")
	if _, err := tx.ExecContext(ctx, "INSERT INTO declines (customer, amount_cents) VALUES (?, ?)",
		req.GetCustomer(), req.GetAmountCents()); err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	if err := p.store.CompleteErrorTx(ctx, tx, declined); err != nil && !errors.Is(err, idempotency.ErrNoClaim) {
		return nil, status.Error(codes.Unavailable, "claim lost: rolled back")
	}
	if err := tx.Commit(); err != nil {
		return nil, status.Error(codes.Unavailable, "commit failed")
	}
	return nil, declined
}

// Example_completeTx serves Charge with its answer recorded in the ledger's
// transaction, and calls it twice with one key, then with an amount the
// card declines, twice too: each runs once, and each retry is a replay.
func Example_completeTx() {
	ctx := context.Background()
	db, err := sql.Open("mysql", databaseDSN())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	s := mysqlstore.New(db)
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if err := createLedger(ctx, db); err != nil {
		fmt.Println(err)
		return
	}

	srv := grpc.NewServer(grpc.UnaryInterceptor(idempotency.UnaryServerInterceptor(s)))
	paymentsv1.RegisterPaymentsServer(srv, &payments{db: db, store: s})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(idempotency.UnaryClientInterceptor()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	client := paymentsv1.NewPaymentsClient(conn)

	for _, c := range []struct {
		key    string
		amount int64
	}{{"order-1", 1999}, {"order-1", 1999}, {"order-2", 250_000}, {"order-2", 250_000}} {
		var header, trailer metadata.MD
		resp, err := client.Charge(ctx, &paymentsv1.ChargeRequest{Customer: "alice", AmountCents: c.amount},
			idempotency.WithKey(c.key), grpc.Header(&header), grpc.Trailer(&trailer))
		replayed := idempotency.Replayed(header, trailer)
		if err != nil {
			fmt.Printf("%s: %s %q, replayed: %t\n", c.key, status.Code(err), status.Convert(err).Message(), replayed)
			continue
		}
		fmt.Printf("%s: charged %s %d cents, replayed: %t\n", c.key, resp.GetPayment().GetId(), resp.GetPayment().GetAmountCents(), replayed)
	}
	var charges, declines int
	if err := db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM charges), (SELECT COUNT(*) FROM declines)").Scan(&charges, &declines); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("ledger: %d charge, %d decline\n", charges, declines)
	// Output:
	// order-1: charged ch_1 1999 cents, replayed: false
	// order-1: charged ch_1 1999 cents, replayed: true
	// order-2: FailedPrecondition "card declined", replayed: false
	// order-2: FailedPrecondition "card declined", replayed: true
	// ledger: 1 charge, 1 decline
}
