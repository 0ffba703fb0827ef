package idempotency_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// newSQLiteStore opens a new SQLite database file in a directory of t's
// with sqlitestore.Open's defaults (WAL, synchronous FULL), migrates the
// store's table (its default name) and returns the store, with no
// sweeper, the pool and the file's path. Both are closed when t ends.
func newSQLiteStore(t *testing.T) (*sqlitestore.Store, *sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idempotency.db")
	db, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s := sqlitestore.New(db, sqlitestore.WithSweepInterval(0))
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s, db, path
}
