package main

import (
	"context"
	"time"

	paymentsv1 "github.com/grpc-idempotency/idempotency/examples/payments/gen/payments/v1"
	"github.com/grpc-idempotency/idempotency/store"
)

// ledgerView is what the story reads from a ledger: [Ledger] in memory,
// [pgLedger] in PostgreSQL, [myLedger] in MySQL, [liteLedger] in SQLite.
type ledgerView interface {
	// ChargesOf returns how many charges customer has.
	ChargesOf(customer string) int
	// Paid returns what customer has paid in all, net of refunds, in cents.
	Paid(customer string) int64
	// Totals returns the number of charges and the cents charged in all.
	Totals() (charges int, cents int64)
}

// backend is what the example runs on: the idempotency store, and a
// payments service over a ledger.
type backend struct {
	store store.Store
	// name names the store in the story.
	name string
	// payments returns the service, its Charge taking latency.
	payments func(latency time.Duration) paymentsv1.PaymentsServer
	ledger   ledgerView
	// replica, in the modes whose Charge records its answer in its ledger
	// transaction (PostgreSQL, MySQL, SQLite), returns another server's service on
	// the same database, whose Charge calls afterCommit after its commit:
	// the story's server that dies there. nil in the other modes.
	replica func(afterCommit func()) paymentsv1.PaymentsServer
	// pg is the PostgreSQL mode's database, nil in the other modes.
	pg *pgBackend
	// my is the MySQL mode's database, nil in the other modes.
	my *myBackend
	// lite is the SQLite mode's database file, nil in the other modes.
	lite  *liteBackend
	close func()
}

// openBackend opens what cfg asks for: PostgreSQL, MySQL or SQLite for the
// ledger and the store together, or a ledger in memory with the memory or Redis
// store.
func openBackend(ctx context.Context, cfg config) (*backend, error) {
	if cfg.PostgresURL != "" {
		return openPostgres(ctx, cfg.PostgresURL)
	}
	if cfg.MySQLDSN != "" {
		return openMySQL(ctx, cfg.MySQLDSN)
	}
	if cfg.SQLitePath != "" {
		return openSQLite(ctx, cfg.SQLitePath)
	}
	s, name, closeStore, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	l := NewLedger()
	return &backend{
		store: s, name: name, ledger: l, close: closeStore,
		payments: func(latency time.Duration) paymentsv1.PaymentsServer {
			return &paymentsService{ledger: l, latency: latency}
		},
	}, nil
}
