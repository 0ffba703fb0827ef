package mysqlstore_test

import (
	"context"
	"database/sql/driver"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestMigrate runs storetest's migration suite on a table of its own.
func TestMigrate(t *testing.T) {
	t.Parallel()
	storetest.RunMigrate(t, func(t *testing.T, n int) []storetest.MigrateStore {
		table := newTableName()
		stores := make([]storetest.MigrateStore, n)
		for i := range stores {
			s := mysqlstore.New(mysqltest.DB(t, 1), mysqlstore.WithTable(table), mysqlstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = s.Close() })
			stores[i] = s
		}
		return stores
	})
}

// TestMigrateTableNames: Migrate creates exactly the table WithTable names,
// quoted as written, with its expires_at index, in the named database.
func TestMigrateTableNames(t *testing.T) {
	t.Parallel()
	db := mysqltest.DB(t, 2)
	dbName := mysqltest.Config(t).DBName
	for _, tc := range []struct{ name, database, table string }{
		{"plain", "", "plain_records"},
		{"space and capitals", "", "Mixed Case"},
		{"quote and semicolon", "", "x`; DROP TABLE y; --"},
		{"database-qualified", dbName, "qualified_records"},
		{"longest name, its purge log's hashed", "", strings.Repeat("L", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.table
			if tc.database != "" {
				name = tc.database + "." + tc.table
			}
			s := mysqlstore.New(db, mysqlstore.WithTable(name), mysqlstore.WithSweepInterval(0))
			defer s.Close()
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			var indexes int
			err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND column_name = 'expires_at'", tc.table).Scan(&indexes)
			if err != nil || indexes != 1 {
				t.Fatalf("expires_at index of %s: %d (%v), want 1", name, indexes, err)
			}
			c, err := s.Claim(t.Context(), "k", []byte("fp"), time.Minute, store.ClaimOptions{})
			if err != nil || !c.Won() {
				t.Fatalf("Claim on %s: %v, won=%v", name, err, c.Won())
			}
			if _, err := s.Purge(t.Context(), "k", store.PurgeOptions{InFlight: true}); err != nil {
				t.Fatalf("Purge on %s (its purge log): %v", name, err)
			}
		})
	}
}

// TestSchemaIsTheFile: Schema is schema.sql, byte for byte.
func TestSchemaIsTheFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != mysqlstore.Schema {
		t.Fatal("mysqlstore.Schema differs from schema.sql")
	}
}

// TestSchemaByHand: applying Schema and PurgeLog as a migration tool
// does, in a database of its own, gives tables the store works on with
// the default names.
func TestSchemaByHand(t *testing.T) {
	t.Parallel()
	cfg := mysqltest.Config(t)
	cfg.DBName = ""
	db := mysqltest.DBFrom(t, cfg, 1)
	name := mysqltest.Config(t).DBName + "_byhand"
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE "+mysqltest.Quote(name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP DATABASE "+mysqltest.Quote(name)) })
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(t.Context(), "USE "+mysqltest.Quote(name))
	if err == nil {
		_, err = conn.ExecContext(t.Context(), mysqlstore.Schema)
	}
	if err == nil {
		_, err = conn.ExecContext(t.Context(), mysqlstore.PurgeLog)
	}
	_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // not back to the pool in another database
	_ = conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := mysqlstore.New(db, mysqlstore.WithTable(name+"."+mysqlstore.DefaultTable), mysqlstore.WithSweepInterval(0))
	defer s.Close()
	if c, err := s.Claim(t.Context(), "k", []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("Claim on the table of Schema: %v, won=%v", err, c.Won())
	}
	if _, err := s.Purge(t.Context(), "k", store.PurgeOptions{InFlight: true}); err != nil {
		t.Fatalf("Purge on the tables of Schema and PurgeLog: %v", err)
	}
}

// TestMigrateRefusesNoAutocommit: Migrate refuses a pool whose connections
// do not commit each statement, which would keep every claim in a
// transaction that never commits.
func TestMigrateRefusesNoAutocommit(t *testing.T) {
	t.Parallel()
	cfg := mysqltest.Config(t)
	cfg.Params = map[string]string{"autocommit": "0"}
	s := mysqlstore.New(mysqltest.DBFrom(t, cfg, 1), mysqlstore.WithTable(newTableName()), mysqlstore.WithSweepInterval(0))
	defer s.Close()
	if err := s.Migrate(t.Context()); err == nil || !strings.Contains(err.Error(), "autocommit") {
		t.Fatalf("Migrate on a pool without autocommit = %v, want an error naming autocommit", err)
	}
}

// TestWithTableInvalid: New panics on a table name it cannot quote.
func TestWithTableInvalid(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "a.", ".a", "a.b.c", strings.Repeat("x", 65)} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("New with WithTable(%q) did not panic", name)
				}
			}()
			mysqlstore.New(nil, mysqlstore.WithTable(name))
		})
	}
}
