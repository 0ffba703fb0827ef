package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-idempotency/idempotency"
	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
)

// pgBackend is the PostgreSQL mode: the ledger and the idempotency records
// in one database, in a schema of the run's own (search_path), dropped
// when the run ends.
type pgBackend struct {
	pool   *pgxpool.Pool
	store  *postgresstore.Store
	schema string
}

// ledgerDDL is the ledger: one row per charge.
const ledgerDDL = `CREATE TABLE charges (
	id             bigserial PRIMARY KEY,
	customer       text   NOT NULL,
	amount_cents   bigint NOT NULL CHECK (amount_cents > 0),
	refunded_cents bigint NOT NULL DEFAULT 0
)`

// openPostgres connects to url, creates the run's schema with the ledger,
// and migrates the store's table into it.
func openPostgres(ctx context.Context, url string) (*backend, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	schema := "payments_demo_" + strings.ToLower(rand.Text()[:8])
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pg := &pgBackend{pool: pool, schema: schema}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema+"; "+ledgerDDL); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres at %s: %w", cfg.ConnConfig.Host, err)
	}
	pg.store = postgresstore.New(pool)
	if err := pg.store.Migrate(ctx); err != nil {
		pg.close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &backend{
		store:  pg.store,
		name:   fmt.Sprintf("PostgreSQL store and ledger at %s, schema %s", cfg.ConnConfig.Host, schema),
		ledger: &pgLedger{pool: pool},
		pg:     pg,
		close:  pg.close,
		payments: func(latency time.Duration) paymentsv1.PaymentsServer {
			return &pgPayments{db: pool, store: pg.store, latency: latency}
		},
		replica: func(afterCommit func()) paymentsv1.PaymentsServer {
			return &pgPayments{db: pool, store: pg.store, afterCommit: afterCommit}
		},
	}, nil
}

// close drops the run's schema and disconnects.
func (pg *pgBackend) close() {
	_ = pg.store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = pg.pool.Exec(ctx, "DROP SCHEMA "+pg.schema+" CASCADE")
	pg.pool.Close()
}

// pgPayments serves payments.v1.Payments from the ledger in PostgreSQL.
// Each Charge and Refund writes the ledger and records its answer in one
// transaction (postgresstore's CompleteTx), so the two commit together.
type pgPayments struct {
	paymentsv1.UnimplementedPaymentsServer
	db      *pgxpool.Pool
	store   *postgresstore.Store
	latency time.Duration
	// afterCommit, when set, runs after a Charge committed and before it
	// answers: the story's server that dies there.
	afterCommit func()
}

// Charge charges a customer: the charge and its recorded answer commit
// together, or neither does.
func (p *pgPayments) Charge(ctx context.Context, req *paymentsv1.ChargeRequest) (*paymentsv1.ChargeResponse, error) {
	switch {
	case req.GetCustomer() == "":
		return nil, status.Error(codes.InvalidArgument, "customer is required")
	case req.GetAmountCents() <= 0:
		return nil, statusOf(errInvalidAmount)
	}
	if err := sleep(ctx, p.latency); err != nil {
		return nil, err
	}
	tx, err := p.db.Begin(ctx)
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	c := charge{Customer: req.GetCustomer(), Amount: req.GetAmountCents()}
	var id, paid int64
	err = tx.QueryRow(ctx, "INSERT INTO charges (customer, amount_cents) VALUES ($1, $2) RETURNING id", c.Customer, c.Amount).Scan(&id)
	if err == nil {
		err = tx.QueryRow(ctx, "SELECT sum(amount_cents - refunded_cents) FROM charges WHERE customer = $1", c.Customer).Scan(&paid)
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
	if err := tx.Commit(ctx); err != nil {
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
func (p *pgPayments) Refund(ctx context.Context, req *paymentsv1.RefundRequest) (*paymentsv1.RefundResponse, error) {
	if req.GetAmountCents() <= 0 {
		return nil, statusOf(errInvalidAmount)
	}
	var resp *paymentsv1.RefundResponse
	err := pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error {
		c, err := chargeFor(ctx, tx, req.GetChargeId(), true)
		if err != nil {
			return err
		}
		if req.GetAmountCents() > c.Amount-c.Refunded {
			return errOverRefunded
		}
		c.Refunded += req.GetAmountCents()
		var paid int64
		if _, err := tx.Exec(ctx, "UPDATE charges SET refunded_cents = $2 WHERE id = $1", idOf(c.ID), c.Refunded); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT sum(amount_cents - refunded_cents) FROM charges WHERE customer = $1", c.Customer).Scan(&paid); err != nil {
			return err
		}
		resp = &paymentsv1.RefundResponse{Payment: paymentOf(c), CustomerTotalCents: paid}
		return p.recordTx(ctx, tx, resp)
	})
	if errors.Is(err, errNoSuchCharge) || errors.Is(err, errOverRefunded) {
		return nil, statusOf(err)
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	return resp, nil
}

// recordTx records resp in tx as the answer of the call whose claim ctx
// carries. A call without a claim (no key on an optional method, a
// disabled method, fail-open) has nothing to record: CompleteTx's
// idempotency.ErrNoClaim is no error here, and tx commits as it would
// without the store. Any other error means the claim was lost: roll back.
func (p *pgPayments) recordTx(ctx context.Context, tx pgx.Tx, resp proto.Message) error {
	if err := p.store.CompleteTx(ctx, tx, resp); err != nil && !errors.Is(err, idempotency.ErrNoClaim) {
		return err
	}
	return nil
}

// GetCharge reads a charge.
func (p *pgPayments) GetCharge(ctx context.Context, req *paymentsv1.GetChargeRequest) (*paymentsv1.GetChargeResponse, error) {
	c, err := chargeFor(ctx, p.db, req.GetChargeId(), false)
	if errors.Is(err, errNoSuchCharge) {
		return nil, statusOf(err)
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, "ledger unavailable")
	}
	return &paymentsv1.GetChargeResponse{Payment: paymentOf(c)}, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// chargeFor reads charge id, locking its row when forUpdate is set.
func chargeFor(ctx context.Context, q querier, id string, forUpdate bool) (charge, error) {
	n := idOf(id)
	if n <= 0 {
		return charge{}, errNoSuchCharge
	}
	sql := "SELECT customer, amount_cents, refunded_cents FROM charges WHERE id = $1"
	if forUpdate {
		sql += " FOR UPDATE"
	}
	c := charge{ID: id}
	err := q.QueryRow(ctx, sql, n).Scan(&c.Customer, &c.Amount, &c.Refunded)
	if errors.Is(err, pgx.ErrNoRows) {
		return charge{}, errNoSuchCharge
	}
	return c, err
}

// idOf returns the row id of a charge id "ch_<n>", or 0.
func idOf(id string) int64 {
	var n int64
	if _, err := fmt.Sscanf(id, "ch_%d", &n); err != nil || fmt.Sprintf("ch_%d", n) != id {
		return 0
	}
	return n
}

// pgLedger reads the ledger in PostgreSQL for the story. A failed query
// reads as -1, which no step accepts.
type pgLedger struct{ pool *pgxpool.Pool }

func (l *pgLedger) ChargesOf(customer string) int {
	var n int
	if l.pool.QueryRow(context.Background(), "SELECT count(*) FROM charges WHERE customer = $1", customer).Scan(&n) != nil {
		return -1
	}
	return n
}

func (l *pgLedger) Paid(customer string) int64 {
	var n int64
	if l.pool.QueryRow(context.Background(), "SELECT coalesce(sum(amount_cents - refunded_cents), 0) FROM charges WHERE customer = $1", customer).Scan(&n) != nil {
		return -1
	}
	return n
}

func (l *pgLedger) Totals() (int, int64) {
	var n int
	var cents int64
	if l.pool.QueryRow(context.Background(), "SELECT count(*), coalesce(sum(amount_cents), 0) FROM charges").Scan(&n, &cents) != nil {
		return -1, -1
	}
	return n, cents
}
