package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// liteBackend is the SQLite mode: the ledger and the idempotency records
// in one database file. The ledger is a table of the run's own, dropped
// when the run ends; the store's table stays in the file, its keys
// carrying the run's id, so that runs on one file never see each other's.
type liteBackend struct {
	db     *sql.DB
	store  *sqlitestore.Store
	ledger string // the run's ledger table
}

// liteLedgerDDL is the ledger: one row per charge, in table %s.
const liteLedgerDDL = `CREATE TABLE %s (
	id             INTEGER PRIMARY KEY,
	customer       TEXT    NOT NULL,
	amount_cents   INTEGER NOT NULL CHECK (amount_cents > 0),
	refunded_cents INTEGER NOT NULL DEFAULT 0
)`

// openSQLite opens the SQLite file at path (created when missing), creates
// the run's ledger table in it, and migrates the store's table.
func openSQLite(ctx context.Context, path string) (*backend, error) {
	db, err := sqlitestore.Open(path)
	if err != nil {
		return nil, err // names sqlitestore and the path
	}
	lite := &liteBackend{db: db, ledger: "payments_demo_" + strings.ToLower(rand.Text()[:8])}
	_, err = db.ExecContext(ctx, fmt.Sprintf(liteLedgerDDL, lite.ledger))
	if err == nil {
		lite.store = sqlitestore.New(db)
		err = lite.store.Migrate(ctx)
	}
	if err != nil {
		lite.close()
		return nil, fmt.Errorf("sqlite file %s: %w", path, err)
	}
	return &backend{
		store:  lite.store,
		name:   fmt.Sprintf("SQLite store and ledger in %s, ledger table %s", path, lite.ledger),
		ledger: &liteLedger{db: db, table: lite.ledger},
		lite:   lite,
		close:  lite.close,
		payments: func(latency time.Duration) paymentsv1.PaymentsServer {
			return &litePayments{db: db, store: lite.store, table: lite.ledger, latency: latency}
		},
		replica: func(afterCommit func()) paymentsv1.PaymentsServer {
			return &litePayments{db: db, store: lite.store, table: lite.ledger, afterCommit: afterCommit}
		},
	}, nil
}

// close drops the run's ledger table and closes the store and the file.
func (lite *liteBackend) close() {
	if lite.store != nil {
		_ = lite.store.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = lite.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+lite.ledger)
	_ = lite.db.Close()
}

// litePayments serves payments.v1.Payments from the ledger in SQLite. Each
// Charge and Refund writes the ledger and records its answer in one
// transaction (sqlitestore's CompleteTx), so the two commit together. A
// transaction on sqlitestore.Open's pool begins IMMEDIATE, holding the
// file's write lock from its start: a Refund's read of the charge needs no
// row lock.
type litePayments struct {
	paymentsv1.UnimplementedPaymentsServer
	db      *sql.DB
	store   *sqlitestore.Store
	table   string
	latency time.Duration
	// afterCommit, when set, runs after a Charge committed and before it
	// answers: the story's server that dies there.
	afterCommit func()
}

// Charge charges a customer: the charge and its recorded answer commit
// together, or neither does.
func (p *litePayments) Charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.ChargeResponse, error) {
	switch {
	case req.GetCustomer() == "":
		return nil, status.Error(codes.InvalidArgument, "customer is required")
	case req.GetAmountCents() <= 0:
		return nil, statusOf(errInvalidAmount)
	}
	if err := sleep(ctx, p.latency); err != nil {
		return nil, err
	}
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	c := charge{Customer: req.GetCustomer(), Amount: req.GetAmountCents()}
	var id, paid int64
	err = tx.QueryRowContext(ctx, "INSERT INTO "+p.table+" (customer, amount_cents) VALUES (?, ?) RETURNING id", c.Customer, c.Amount).Scan(&id)
	if err == nil {
		err = tx.QueryRowContext(ctx, "SELECT SUM(amount_cents - refunded_cents) FROM "+p.table+" WHERE customer = ?", c.Customer).Scan(&paid)
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	c.ID = fmt.Sprintf("ch_%d", id)
	resp := &paymentsv1.ChargeResponse{Payment: paymentOf(c), CustomerTotalCents: paid}
	if err := p.recordTx(ctx, tx, resp); err != nil {
		// The claim was lost: another server owns the key now. Roll back.
		return nil, status.Error(codes.Unavailable, "idempotency claim lost; rolled back")
	}
	if err := tx.Commit(); err != nil {
		// Maybe committed, maybe not: the release this error leads to
		// keeps a committed record, so a retry replays it.
		return nil, status.Error(codes.Unavailable, "ledger commit failed")
	}
	if p.afterCommit != nil {
		p.afterCommit()
	}
	return resp, nil
}

// Refund refunds part of a charge, in one transaction with its answer.
// Refusals (no such charge, too much) write nothing: the interceptor
// stores them as it stores any deterministic error.
func (p *litePayments) Refund(ctx context.Context, req *paymentsv1.RefundRequest) (*paymentsv1.RefundResponse, error) {
	if req.GetAmountCents() <= 0 {
		return nil, statusOf(errInvalidAmount)
	}
	resp, err := p.refund(ctx, req)
	if errors.Is(err, errNoSuchCharge) || errors.Is(err, errOverRefunded) {
		return nil, statusOf(err)
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	return resp, nil
}

func (p *litePayments) refund(ctx context.Context, req *paymentsv1.RefundRequest) (*paymentsv1.RefundResponse, error) {
	tx, err := p.db.BeginTx(ctx, nil) // IMMEDIATE: the write lock is held from here
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	c, err := p.chargeFor(ctx, tx, req.GetChargeId())
	if err != nil {
		return nil, err
	}
	if req.GetAmountCents() > c.Amount-c.Refunded {
		return nil, errOverRefunded
	}
	c.Refunded += req.GetAmountCents()
	var paid int64
	if _, err := tx.ExecContext(ctx, "UPDATE "+p.table+" SET refunded_cents = ? WHERE id = ?", c.Refunded, idOf(c.ID)); err != nil {
		return nil, err
	}
	if err := tx.QueryRowContext(ctx, "SELECT SUM(amount_cents - refunded_cents) FROM "+p.table+" WHERE customer = ?", c.Customer).Scan(&paid); err != nil {
		return nil, err
	}
	resp := &paymentsv1.RefundResponse{Payment: paymentOf(c), CustomerTotalCents: paid}
	if err := p.recordTx(ctx, tx, resp); err != nil {
		return nil, err
	}
	return resp, tx.Commit()
}

// recordTx records resp in tx as the answer of the call whose claim ctx
// carries. A call without a claim (no key on an optional method, a
// disabled method, fail-open) has nothing to record: CompleteTx's
// idempotency.ErrNoClaim is no error here, and tx commits as it would
// without the store. Any other error means the claim was lost: roll back.
func (p *litePayments) recordTx(ctx context.Context, tx *sql.Tx, resp proto.Message) error {
	if err := p.store.CompleteTx(ctx, tx, resp); err != nil && !errors.Is(err, idempotency.ErrNoClaim) {
		return err
	}
	return nil
}

// GetCharge reads a charge.
func (p *litePayments) GetCharge(ctx context.Context, req *paymentsv1.GetChargeRequest) (*paymentsv1.GetChargeResponse, error) {
	c, err := p.chargeFor(ctx, p.db, req.GetChargeId())
	if errors.Is(err, errNoSuchCharge) {
		return nil, statusOf(err)
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	return &paymentsv1.GetChargeResponse{Payment: paymentOf(c)}, nil
}

// chargeFor reads charge id.
func (p *litePayments) chargeFor(ctx context.Context, q rowQuerier, id string) (charge, error) {
	n := idOf(id)
	if n <= 0 {
		return charge{}, errNoSuchCharge
	}
	c := charge{ID: id}
	err := q.QueryRowContext(ctx, "SELECT customer, amount_cents, refunded_cents FROM "+p.table+" WHERE id = ?", n).Scan(&c.Customer, &c.Amount, &c.Refunded)
	if errors.Is(err, sql.ErrNoRows) {
		return charge{}, errNoSuchCharge
	}
	return c, err
}

// liteLedger reads the ledger in SQLite for the story. A failed query
// reads as -1, which no step accepts.
type liteLedger struct {
	db    *sql.DB
	table string
}

func (l *liteLedger) ChargesOf(customer string) int {
	var n int
	if l.db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+l.table+" WHERE customer = ?", customer).Scan(&n) != nil {
		return -1
	}
	return n
}

func (l *liteLedger) Paid(customer string) int64 {
	var n int64
	if l.db.QueryRowContext(context.Background(), "SELECT COALESCE(SUM(amount_cents - refunded_cents), 0) FROM "+l.table+" WHERE customer = ?", customer).Scan(&n) != nil {
		return -1
	}
	return n
}

func (l *liteLedger) Totals() (int, int64) {
	var n int
	var cents int64
	if l.db.QueryRowContext(context.Background(), "SELECT COUNT(*), COALESCE(SUM(amount_cents), 0) FROM "+l.table).Scan(&n, &cents) != nil {
		return -1, -1
	}
	return n, cents
}
