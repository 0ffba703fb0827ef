package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
)

// myBackend is the MySQL mode: the ledger and the idempotency records in
// one database of the run's own, dropped when the run ends.
type myBackend struct {
	db       *sql.DB
	store    *mysqlstore.Store
	database string
	admin    *sql.DB // on the server, without a database: creates and drops it
}

// myLedgerDDL is the ledger: one row per charge.
const myLedgerDDL = `CREATE TABLE charges (
	id             BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
	customer       VARCHAR(200) NOT NULL,
	amount_cents   BIGINT       NOT NULL CHECK (amount_cents > 0),
	refunded_cents BIGINT       NOT NULL DEFAULT 0
) ENGINE = InnoDB`

// openMySQL connects to the server of dsn (a go-sql-driver/mysql DSN),
// creates the run's database with the ledger, and migrates the store's
// table into it.
func openMySQL(ctx context.Context, dsn string) (*backend, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	cfg.DBName = ""
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	adminConn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	my := &myBackend{admin: sql.OpenDB(adminConn), database: "payments_demo_" + strings.ToLower(rand.Text()[:8])}
	if _, err := my.admin.ExecContext(ctx, "CREATE DATABASE "+my.database); err != nil {
		_ = my.admin.Close()
		return nil, fmt.Errorf("mysql at %s: %w", cfg.Addr, err)
	}
	cfg.DBName = my.database
	conn, err := mysql.NewConnector(cfg)
	if err == nil {
		my.db = sql.OpenDB(conn)
		_, err = my.db.ExecContext(ctx, myLedgerDDL)
	}
	if err == nil {
		my.store = mysqlstore.New(my.db)
		err = my.store.Migrate(ctx)
	}
	if err != nil {
		my.close()
		return nil, fmt.Errorf("mysql at %s: %w", cfg.Addr, err)
	}
	return &backend{
		store:  my.store,
		name:   fmt.Sprintf("MySQL store and ledger at %s, database %s", cfg.Addr, my.database),
		ledger: &myLedger{db: my.db},
		my:     my,
		close:  my.close,
		payments: func(latency time.Duration) paymentsv1.PaymentsServer {
			return &myPayments{db: my.db, store: my.store, latency: latency}
		},
		replica: func(afterCommit func()) paymentsv1.PaymentsServer {
			return &myPayments{db: my.db, store: my.store, afterCommit: afterCommit}
		},
	}, nil
}

// close drops the run's database and disconnects.
func (my *myBackend) close() {
	if my.store != nil {
		_ = my.store.Close()
	}
	if my.db != nil {
		_ = my.db.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = my.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+my.database)
	_ = my.admin.Close()
}

// myPayments serves payments.v1.Payments from the ledger in MySQL. Each
// Charge and Refund writes the ledger and records its answer in one
// transaction (mysqlstore's CompleteTx), so the two commit together.
type myPayments struct {
	paymentsv1.UnimplementedPaymentsServer
	db      *sql.DB
	store   *mysqlstore.Store
	latency time.Duration
	// afterCommit, when set, runs after a Charge committed and before it
	// answers: the story's server that dies there.
	afterCommit func()
}

// Charge charges a customer: the charge and its recorded answer commit
// together, or neither does.
func (p *myPayments) Charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.ChargeResponse, error) {
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
	var paid int64
	res, err := tx.ExecContext(ctx, "INSERT INTO charges (customer, amount_cents) VALUES (?, ?)", c.Customer, c.Amount)
	var id int64
	if err == nil {
		id, err = res.LastInsertId()
	}
	if err == nil {
		err = tx.QueryRowContext(ctx, "SELECT SUM(amount_cents - refunded_cents) FROM charges WHERE customer = ?", c.Customer).Scan(&paid)
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
func (p *myPayments) Refund(ctx context.Context, req *paymentsv1.RefundRequest) (*paymentsv1.RefundResponse, error) {
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

func (p *myPayments) refund(ctx context.Context, req *paymentsv1.RefundRequest) (*paymentsv1.RefundResponse, error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	c, err := myChargeFor(ctx, tx, req.GetChargeId(), true)
	if err != nil {
		return nil, err
	}
	if req.GetAmountCents() > c.Amount-c.Refunded {
		return nil, errOverRefunded
	}
	c.Refunded += req.GetAmountCents()
	var paid int64
	if _, err := tx.ExecContext(ctx, "UPDATE charges SET refunded_cents = ? WHERE id = ?", c.Refunded, idOf(c.ID)); err != nil {
		return nil, err
	}
	if err := tx.QueryRowContext(ctx, "SELECT SUM(amount_cents - refunded_cents) FROM charges WHERE customer = ?", c.Customer).Scan(&paid); err != nil {
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
func (p *myPayments) recordTx(ctx context.Context, tx *sql.Tx, resp proto.Message) error {
	if err := p.store.CompleteTx(ctx, tx, resp); err != nil && !errors.Is(err, idempotency.ErrNoClaim) {
		return err
	}
	return nil
}

// GetCharge reads a charge.
func (p *myPayments) GetCharge(ctx context.Context, req *paymentsv1.GetChargeRequest) (*paymentsv1.GetChargeResponse, error) {
	c, err := myChargeFor(ctx, p.db, req.GetChargeId(), false)
	if errors.Is(err, errNoSuchCharge) {
		return nil, statusOf(err)
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	return &paymentsv1.GetChargeResponse{Payment: paymentOf(c)}, nil
}

// rowQuerier is a pool or a transaction.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// myChargeFor reads charge id, locking its row when forUpdate is set.
func myChargeFor(ctx context.Context, q rowQuerier, id string, forUpdate bool) (charge, error) {
	n := idOf(id)
	if n <= 0 {
		return charge{}, errNoSuchCharge
	}
	query := "SELECT customer, amount_cents, refunded_cents FROM charges WHERE id = ?"
	if forUpdate {
		query += " FOR UPDATE"
	}
	c := charge{ID: id}
	err := q.QueryRowContext(ctx, query, n).Scan(&c.Customer, &c.Amount, &c.Refunded)
	if errors.Is(err, sql.ErrNoRows) {
		return charge{}, errNoSuchCharge
	}
	return c, err
}

// myLedger reads the ledger in MySQL for the story. A failed query reads
// as -1, which no step accepts.
type myLedger struct{ db *sql.DB }

func (l *myLedger) ChargesOf(customer string) int {
	var n int
	if l.db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM charges WHERE customer = ?", customer).Scan(&n) != nil {
		return -1
	}
	return n
}

func (l *myLedger) Paid(customer string) int64 {
	var n int64
	if l.db.QueryRowContext(context.Background(), "SELECT COALESCE(SUM(amount_cents - refunded_cents), 0) FROM charges WHERE customer = ?", customer).Scan(&n) != nil {
		return -1
	}
	return n
}

func (l *myLedger) Totals() (int, int64) {
	var n int
	var cents int64
	if l.db.QueryRowContext(context.Background(), "SELECT COUNT(*), COALESCE(SUM(amount_cents), 0) FROM charges").Scan(&n, &cents) != nil {
		return -1, -1
	}
	return n, cents
}
