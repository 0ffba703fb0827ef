package postgresstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// schemaV1 is the table of schema version 1 (releases before abandoned
// claims), without its storage parameters.
const schemaV1 = `CREATE TABLE %s (
	key         bytea       NOT NULL PRIMARY KEY,
	state       smallint    NOT NULL CHECK (state IN (1, 2)),
	token       bytea       NOT NULL,
	fingerprint bytea       NOT NULL,
	data        bytea,
	expires_at  timestamptz NOT NULL
)`

// TestMigrateFromVersion1: on a table of schema version 1, the store's
// steps fail with an error that says to migrate; Migrate adds the columns
// of version 2, the rows written by an earlier release keep their meaning
// (an in-flight row stays in flight, under its owner's token, as attempt
// 1; a completed row replays), and the whole conformance suite passes on
// the upgraded table.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, 8)
	table := newSchema(t, pool) + ".records"
	ctx := t.Context()
	if _, err := pool.Exec(ctx, strings.Replace(schemaV1, "%s", table, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+table+` (key, state, token, fingerprint, data, expires_at) VALUES
		('busy', 1, 'owner', 'fp', NULL, clock_timestamp() + interval '1 hour'),
		('done', 2, 'winner', 'fp', 'out', clock_timestamp() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	s := postgresstore.New(pool, postgresstore.WithTable(table), postgresstore.WithSweepInterval(50*time.Millisecond))
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Claim(ctx, "new", []byte("fp"), time.Hour, store.ClaimOptions{}); err == nil || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("Claim on a table of version 1: %v, want an error that says to run Migrate", err)
	}
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Claim(ctx, "busy", []byte("fp"), time.Hour, store.ClaimOptions{Keep: time.Hour, TakeOver: true})
	if err != nil || c.Won() || c.Existing.State != store.StateInFlight {
		t.Fatalf("take-over Claim of an in-flight row of version 1: %+v, %v, want it in flight", c, err)
	}
	if info, err := s.Lookup(ctx, "busy"); err != nil || info.State != store.StateInFlight || info.Token != "owner" || info.Attempt != 1 {
		t.Fatalf("Lookup of an in-flight row of version 1: %+v, %v, want in flight, its owner's token, attempt 1", info, err)
	}
	if err := s.Abandon(ctx, "busy", "owner"); err != nil {
		t.Fatalf("Abandon of an in-flight row of version 1 by its owner: %v", err)
	}
	if _, err := s.Lookup(ctx, "busy"); err == nil {
		t.Fatal("a row of version 1 (claimed without a keep) is still there after Abandon")
	}
	c, err = s.Claim(ctx, "done", []byte("fp"), time.Hour, store.ClaimOptions{Keep: time.Hour, TakeOver: true})
	if err != nil || c.Won() || c.Existing.State != store.StateCompleted || string(c.Existing.Data) != "out" {
		t.Fatalf("Claim of a completed row of version 1: %+v, %v, want its replay", c, err)
	}
	storetest.Run(t, func(t *testing.T) store.Store { return s })
}

// TestMigrateUpToDateWaitsForNoCall: Migrate on a table that is up to
// date runs no DDL, so it waits for no lock that calls hold: neither the
// ACCESS EXCLUSIVE lock of ALTER TABLE (which waits even for readers) nor
// the SHARE lock of CREATE INDEX IF NOT EXISTS (which waits for writers),
// behind which every new claim would queue. Here a transaction that wrote
// the table (as a handler's CompleteTx does) holds its lock throughout, and
// Migrate, on connections that give up on a lock after a second,
// succeeds.
func TestMigrateUpToDateWaitsForNoCall(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t, 2, postgresstore.WithSweepInterval(0))
	c, err := s.Claim(t.Context(), "k", []byte("fp"), time.Hour, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	writer, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = writer.Rollback(t.Context()) }()
	if _, err := writer.Exec(t.Context(), "UPDATE "+tableOf(t, s)+" SET expires_at = expires_at WHERE key = 'k'"); err != nil {
		t.Fatal(err)
	}
	cfg := pgtest.Config(t, 1)
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "1s"
	again := postgresstore.New(pgtest.PoolFrom(t, cfg), postgresstore.WithTable(tableOf(t, s)), postgresstore.WithSweepInterval(0))
	defer again.Close()
	if err := again.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate of an up-to-date table while a writer holds it: %v", err)
	}
}
