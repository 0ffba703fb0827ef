package sqlitestore_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestMigrate runs storetest's migration suite on a fresh file, each
// server a pool of its own on it, as processes sharing the file are.
func TestMigrate(t *testing.T) {
	t.Parallel()
	storetest.RunMigrate(t, func(t *testing.T, n int) []storetest.MigrateStore {
		path := filepath.Join(t.TempDir(), "migrate.db")
		stores := make([]storetest.MigrateStore, n)
		for i := range stores {
			db, err := sqlitestore.Open(path, sqlitestore.WithMaxConns(1))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			s := sqlitestore.New(db, sqlitestore.WithSweepInterval(0))
			t.Cleanup(func() { _ = s.Close() })
			stores[i] = s
		}
		return stores
	})
}

// TestMigrateTableNames: Migrate creates exactly the table WithTable names,
// quoted as written, with its expires_at index, and its purge log, which
// a purge writes.
func TestMigrateTableNames(t *testing.T) {
	t.Parallel()
	db, _ := openDB(t)
	for _, tc := range []struct{ name, table string }{
		{"plain", "plain_records"},
		{"space and capitals", "Mixed Case"},
		{"quote and semicolon", `x"; DROP TABLE y; --`},
		{"schema-qualified", "main.qualified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sqlitestore.New(db, sqlitestore.WithTable(tc.table), sqlitestore.WithSweepInterval(0))
			defer s.Close()
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			name := tc.table
			if tc.name == "schema-qualified" {
				name = "qualified"
			}
			var indexes int
			err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? AND name = ?", name, name+"_expires_at_idx").Scan(&indexes)
			if err != nil || indexes != 1 {
				t.Fatalf("expires_at index of %s: %d (%v), want 1", name, indexes, err)
			}
			if c, err := s.Claim(t.Context(), "k", []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil || !c.Won() {
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
	if string(b) != sqlitestore.Schema {
		t.Fatal("sqlitestore.Schema differs from schema.sql")
	}
}

// TestSchemaByHand: applying Schema as a migration tool does gives a
// table the store works on with the default name.
func TestSchemaByHand(t *testing.T) {
	t.Parallel()
	db, _ := openDB(t)
	if _, err := db.ExecContext(t.Context(), sqlitestore.Schema); err != nil {
		t.Fatal(err)
	}
	s := sqlitestore.New(db, sqlitestore.WithSweepInterval(0))
	defer s.Close()
	if c, err := s.Claim(t.Context(), "k", []byte("fp"), time.Minute, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("Claim on the table of Schema: %v, won=%v", err, c.Won())
	}
}

// TestMigrateAddsPurgeLog: on a file made before the purge log (the
// records table and its index alone), a purge fails and deletes nothing;
// Migrate adds the log, and a purge then reaches the subscription of
// another pool on the file.
func TestMigrateAddsPurgeLog(t *testing.T) {
	t.Parallel()
	db, path := openDB(t)
	old, _, ok := strings.Cut(sqlitestore.Schema, "CREATE TABLE IF NOT EXISTS "+sqlitestore.DefaultTable+"_purges")
	if !ok {
		t.Fatal("Schema has no purge log")
	}
	if _, err := db.ExecContext(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	s := sqlitestore.New(db, sqlitestore.WithSweepInterval(0))
	defer s.Close()
	other, _ := openAt(t, path)
	sub := sqlitestore.New(other, sqlitestore.WithSweepInterval(0), sqlitestore.WithInvalidationInterval(10*time.Millisecond))
	defer sub.Close()
	storetest.CheckLogAdded(t, s, sub, func(t *testing.T) {
		if err := s.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
