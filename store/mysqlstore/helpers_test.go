package mysqlstore_test

import (
	"crypto/rand"
	"database/sql"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// newTableName returns a table name no other test uses, in the package's
// database.
func newTableName() string {
	return "t_" + strings.ToLower(rand.Text()[:12])
}

// newStore returns a migrated store on a table of its own, closed when tb
// ends, and its pool.
func newStore(tb testing.TB, maxConns int, opts ...mysqlstore.Option) (*mysqlstore.Store, *sql.DB) {
	tb.Helper()
	return newStoreOn(tb, mysqltest.DB(tb, maxConns), newTableName(), opts...)
}

// newStoreFrom is newStore on a pool opened with cfg.
func newStoreFrom(tb testing.TB, cfg *mysql.Config, maxConns int, opts ...mysqlstore.Option) (*mysqlstore.Store, *sql.DB) {
	tb.Helper()
	return newStoreOn(tb, mysqltest.DBFrom(tb, cfg, maxConns), newTableName(), opts...)
}

// newStoreOn returns a migrated store on db and table, closed when tb
// ends.
func newStoreOn(tb testing.TB, db *sql.DB, table string, opts ...mysqlstore.Option) (*mysqlstore.Store, *sql.DB) {
	tb.Helper()
	s := mysqlstore.New(db, append([]mysqlstore.Option{mysqlstore.WithTable(table)}, opts...)...)
	tb.Cleanup(func() { _ = s.Close() })
	tables.Store(s, table)
	if err := s.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return s, db
}

// tables remembers the table of each store newStore made.
var tables sync.Map

func tableOf(tb testing.TB, s *mysqlstore.Store) string {
	tb.Helper()
	name, ok := tables.Load(s)
	if !ok {
		tb.Fatal("store not made by newStore")
	}
	return name.(string)
}
