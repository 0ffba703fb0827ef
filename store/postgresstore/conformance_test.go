package postgresstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/grpc-idempotency/idempotency"
	testingv1 "github.com/grpc-idempotency/idempotency/internal/gen/idempotency/testing/v1"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestConformance runs the shared suite on one store, with its sweeper
// deleting expired rows every 50ms while the cases run: on the default
// table in the search_path, on a schema-qualified table of its own, in
// the pgx query exec modes that use no prepared statement (for PgBouncer),
// and on connections whose default isolation is stricter than READ
// COMMITTED (each step then asks for READ COMMITTED).
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		table     bool
		mode      pgx.QueryExecMode
		isolation string // default_transaction_isolation, when not the server's
	}{
		{"default table", false, pgx.QueryExecModeCacheStatement, ""},
		{"schema-qualified table", true, pgx.QueryExecModeCacheStatement, ""},
		// What PgBouncer before 1.21 needs: no prepared statements.
		{"exec mode", true, pgx.QueryExecModeExec, ""},
		{"simple protocol", true, pgx.QueryExecModeSimpleProtocol, ""},
		{"serializable by default", true, pgx.QueryExecModeCacheStatement, "serializable"},
		{"repeatable read by default, exec mode", true, pgx.QueryExecModeExec, "repeatable read"},
		{"serializable by default, simple protocol", true, pgx.QueryExecModeSimpleProtocol, "serializable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := pgtest.Config(t, 8)
			cfg.ConnConfig.DefaultQueryExecMode = tc.mode
			if tc.isolation != "" {
				cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = tc.isolation
			}
			pool := pgtest.PoolFrom(t, cfg)
			opts := []postgresstore.Option{postgresstore.WithSweepInterval(50 * time.Millisecond)}
			if tc.table {
				opts = append(opts, postgresstore.WithTable(newSchema(t, pool)+".Records"))
			}
			s := postgresstore.New(pool, opts...)
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			storetest.Run(t, func(t *testing.T) store.Store { return s })
		})
	}
}

// TestConformanceThroughPgBouncer runs the suite through a PgBouncer in
// transaction pooling mode with two server connections, from a pool in
// pgx's exec mode (PgBouncer before 1.21 cannot carry prepared statements
// from one server connection to the next: in pgx's default mode this run
// fails with "prepared statement … does not exist"), with the sweeper
// running. Each step is one statement in its own transaction, so any
// server connection may run it; the subscriptions of Invalidations, which
// LISTEN, connect to PostgreSQL directly (WithListenConfig).
func TestConformanceThroughPgBouncer(t *testing.T) {
	t.Parallel()
	url := pgtest.StartBouncer(t, 2)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 16
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool := pgtest.PoolFrom(t, cfg)
	table := newSchema(t, pgtest.Pool(t, 1)) + ".records"
	// LISTEN needs a session of its own: Invalidations reaches
	// PostgreSQL directly.
	s := postgresstore.New(pool, postgresstore.WithTable(table), postgresstore.WithSweepInterval(50*time.Millisecond),
		postgresstore.WithListenConfig(pgtest.Config(t, 1).ConnConfig))
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T) store.Store { return s })
}

// TestCompleteTxThroughPgBouncer: a handler's transaction through PgBouncer
// in transaction pooling mode records its outcome with CompleteTx; the
// retry replays it.
func TestCompleteTxThroughPgBouncer(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(pgtest.StartBouncer(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	pool := pgtest.PoolFrom(t, cfg)
	table := newSchema(t, pgtest.Pool(t, 1)) + ".records"
	s := postgresstore.New(pool, postgresstore.WithTable(table), postgresstore.WithSweepInterval(0))
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	tables.Store(s, table)
	f := newTxFixtureOn(t, s, pool, charge)
	ctx := keyed(t.Context(), "k")
	for i := range 3 {
		if resp, err := f.client.Do(ctx, &testingv1.DoRequest{Payload: "bounced"}); err != nil || resp.GetPayload() != "bounced" {
			t.Fatalf("call %d: %v, %v", i, resp, err)
		}
	}
	if n := f.ledgerRows(t, "bounced"); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
	if n := f.events.Count(idempotency.DecisionReplayed); n != 2 {
		t.Fatalf("%d replays, want 2", n)
	}
}
