package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver of sql.Open
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// payments keeps its ledger in MySQL and records each charge's answer in
// the transaction that writes the charge.
type payments struct {
	db    *sql.DB
	store *mysqlstore.Store
}

// Charge charges a customer once per idempotency key, run under
// idempotency.Do (a gRPC handler under the interceptor does the same): the
// charge and its recorded answer, the charge's id, commit together, or
// neither does.
func (p *payments) Charge(ctx context.Context, customer string, amountCents int64) (*wrapperspb.StringValue, error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	if amountCents > 100_000 {
		return p.decline(ctx, tx, customer, amountCents)
	}

	res, err := tx.ExecContext(ctx, "INSERT INTO charges (customer, amount_cents) VALUES (?, ?)",
		customer, amountCents)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	id, _ := res.LastInsertId()
	resp := wrapperspb.String(fmt.Sprintf("ch_%d", id))
	// The answer, in the same transaction, fenced by the call's claim.
	switch err := p.store.CompleteTx(ctx, tx, resp); {
	case errors.Is(err, idempotency.ErrNoClaim):
		// A call without a claim (WithFailOpen while the store is down;
		// for a gRPC handler, no key on an optional method or a disabled
		// method): nothing to record. Commit as without this store.
	case err != nil:
		// The claim was lost (store.ErrLeaseLost), or InnoDB rolled the
		// transaction back (a deadlock): roll back (deferred) and let
		// the caller retry.
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
func (p *payments) decline(ctx context.Context, tx *sql.Tx, customer string, amountCents int64) (*wrapperspb.StringValue, error) {
	declined := status.Error(codes.FailedPrecondition, "card declined")
	if _, err := tx.ExecContext(ctx, "INSERT INTO declines (customer, amount_cents) VALUES (?, ?)",
		customer, amountCents); err != nil {
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

// Example_completeTx runs Charge under idempotency.Do with its answer
// recorded in the ledger's transaction, twice with one key, then twice
// with an amount the card declines: each runs once, and each retry is a
// replay.
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
	idem := idempotency.NewServer(s)
	p := &payments{db: db, store: s}

	const customer = "alice"
	for _, c := range []struct {
		key    string
		amount int64
	}{{"order-1", 1999}, {"order-1", 1999}, {"order-2", 250_000}, {"order-2", 250_000}} {
		// What the key stands for: a retry with another amount is refused.
		req, err := structpb.NewStruct(map[string]any{"customer": customer, "amount_cents": c.amount})
		if err != nil {
			fmt.Println(err)
			return
		}
		resp, replayed, err := idempotency.Do(ctx, idem, "payments.charge", c.key, req,
			func(ctx context.Context) (*wrapperspb.StringValue, error) { return p.Charge(ctx, customer, c.amount) })
		if err != nil {
			fmt.Printf("%s: %s %q, replayed: %t\n", c.key, status.Code(err), status.Convert(err).Message(), replayed)
			continue
		}
		fmt.Printf("%s: charged %s %d cents, replayed: %t\n", c.key, resp.GetValue(), c.amount, replayed)
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
