package mysqlstore_test

import (
	"database/sql"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// schemaV1 is the table of schema version 1, as releases before abandoned
// claims created it.
const schemaV1 = "CREATE TABLE %s (" +
	"`key` VARBINARY(255) NOT NULL, state TINYINT NOT NULL, token VARBINARY(64) NOT NULL, " +
	"fingerprint VARBINARY(255) NOT NULL, data LONGBLOB NULL, expires_at DATETIME(6) NOT NULL, " +
	"PRIMARY KEY (`key`), KEY expires_at_idx (expires_at), CHECK (state IN (1, 2))) ENGINE = InnoDB"

// newV1Table creates a table of schema version 1 holding a claim in
// flight under "inflight" (token tok) and an outcome under "done", as a
// server of an earlier release left them, and returns its name.
func newV1Table(t *testing.T, db *sql.DB, tok string) string {
	t.Helper()
	table := newTableName()
	for _, q := range []string{
		strings.Replace(schemaV1, "%s", table, 1),
		"INSERT INTO " + table + " VALUES ('inflight', 1, '" + tok + "', 'fp', NULL, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)",
		"INSERT INTO " + table + " VALUES ('done', 2, '" + store.NewToken() + "', 'fp', 'out', UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)",
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	return table
}

// TestMigrateUpgradesV1: eight servers migrating a table of schema
// version 1 at once all succeed (one adds each column, the others find it
// added), the rows an earlier release left keep working (in flight as
// attempt 1, with the lease they had), and the table then takes kept
// claims.
func TestMigrateUpgradesV1(t *testing.T) {
	t.Parallel()
	db := mysqltest.DB(t, 2)
	tok := store.NewToken()
	table := newV1Table(t, db, tok)
	stores := serversOn(t, table, 8)
	migrateAll(t, stores, "a version-1 table")
	s := stores[0]
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate of the upgraded table: %v", err)
	}
	info, err := s.Lookup(t.Context(), "inflight")
	if err != nil || info.State != store.StateInFlight || info.Attempt != 1 || info.Token != tok || time.Until(info.Expires) < 50*time.Minute {
		t.Fatalf("Lookup of a version-1 claim: %+v, %v, want in flight as attempt 1 under %q, for an hour", info, err, tok)
	}
	if err := s.Extend(t.Context(), "inflight", tok, time.Hour); err != nil {
		t.Fatalf("Extend of a version-1 claim: %v", err)
	}
	if err := s.Complete(t.Context(), "inflight", tok, []byte("late"), time.Hour); err != nil {
		t.Fatalf("Complete of a version-1 claim: %v", err)
	}
	if c, err := s.Claim(t.Context(), "done", []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil || c.Existing.State != store.StateCompleted || string(c.Existing.Data) != "out" {
		t.Fatalf("replay of a version-1 outcome: %+v, %v", c, err)
	}
	c, err := s.Claim(t.Context(), "kept", []byte("fp"), time.Minute, store.ClaimOptions{Keep: time.Hour})
	if err == nil {
		err = s.Abandon(t.Context(), "kept", c.Token)
	}
	if info, lerr := s.Lookup(t.Context(), "kept"); err != nil || lerr != nil || info.State != store.StateAbandoned {
		t.Fatalf("kept claim abandoned on the upgraded table: %+v, %v, %v", info, err, lerr)
	}
}

// serversOn returns n stores on table, each on a pool of one connection
// of its own, as n servers' are, closed when t ends.
func serversOn(t *testing.T, table string, n int, opts ...mysqlstore.Option) []*mysqlstore.Store {
	t.Helper()
	stores := make([]*mysqlstore.Store, n)
	for i := range stores {
		stores[i] = mysqlstore.New(mysqltest.DB(t, 1), append([]mysqlstore.Option{mysqlstore.WithTable(table), mysqlstore.WithSweepInterval(0)}, opts...)...)
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	return stores
}

// migrateAll runs the Migrate of every store at once, and fails t unless
// each succeeds.
func migrateAll(t *testing.T, stores []*mysqlstore.Store, what string) {
	t.Helper()
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(t.Context()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("server %d: Migrate of %s: %v", i, what, err)
		}
	}
}

// TestUpgradeMakesTheSchema: a table of version 1 with Upgrade applied by
// hand, as a migration tool does, has the columns of a table made by
// Schema, in the same order, of the same types.
func TestUpgradeMakesTheSchema(t *testing.T) {
	t.Parallel()
	db := mysqltest.DB(t, 1)
	upgraded := newV1Table(t, db, store.NewToken())
	if _, err := db.ExecContext(t.Context(), strings.Replace(mysqlstore.Upgrade, "ALTER TABLE "+mysqlstore.DefaultTable, "ALTER TABLE "+upgraded, 1)); err != nil {
		t.Fatal(err)
	}
	fresh := newTableName()
	if _, err := db.ExecContext(t.Context(), strings.Replace(mysqlstore.Schema, "CREATE TABLE IF NOT EXISTS "+mysqlstore.DefaultTable, "CREATE TABLE "+fresh, 1)); err != nil {
		t.Fatal(err)
	}
	if got, want := columns(t, db, upgraded), columns(t, db, fresh); got != want {
		t.Fatalf("columns of a version-1 table after Upgrade:\n%s\nwant those of Schema:\n%s", got, want)
	}
}

// columns describes the columns of table, in order.
func columns(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT column_name, column_type, is_nullable, COALESCE(column_default, 'none') FROM information_schema.columns "+
		"WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position", table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var name, typ, null, def string
		if err := rows.Scan(&name, &typ, &null, &def); err != nil {
			t.Fatal(err)
		}
		b.WriteString(name + " " + typ + " " + null + " " + def + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestUpgradeIsTheFile: Upgrade is upgrade.sql, byte for byte.
func TestUpgradeIsTheFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("upgrade.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != mysqlstore.Upgrade {
		t.Fatal("mysqlstore.Upgrade differs from upgrade.sql")
	}
}
