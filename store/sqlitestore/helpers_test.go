package sqlitestore_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// openDB opens a fresh database file in tb's temporary directory with
// sqlitestore.Open, closed when tb ends, and returns it and its path.
func openDB(tb testing.TB, opts ...sqlitestore.OpenOption) (*sql.DB, string) {
	tb.Helper()
	return openAt(tb, filepath.Join(tb.TempDir(), "idempotency.db"), opts...)
}

// openAt opens the database file at path with sqlitestore.Open, closed
// when tb ends, and returns it and its path.
func openAt(tb testing.TB, path string, opts ...sqlitestore.OpenOption) (*sql.DB, string) {
	tb.Helper()
	db, err := sqlitestore.Open(path, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db, path
}

// newStore returns a migrated store on a fresh database file, closed when
// tb ends, and its pool.
func newStore(tb testing.TB, opts ...sqlitestore.Option) (*sqlitestore.Store, *sql.DB) {
	tb.Helper()
	db, _ := openDB(tb)
	return newStoreOn(tb, db, opts...), db
}

// newStoreOn returns a migrated store on db, closed when tb ends.
func newStoreOn(tb testing.TB, db *sql.DB, opts ...sqlitestore.Option) *sqlitestore.Store {
	tb.Helper()
	s := sqlitestore.New(db, opts...)
	tb.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return s
}
