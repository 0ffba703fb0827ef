package postgresstore_test

import (
	"crypto/rand"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// newSchema creates a schema of its own for tb in the package's database
// and returns its name.
func newSchema(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	name := "t_" + strings.ToLower(rand.Text()[:12])
	if _, err := pool.Exec(tb.Context(), "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatal(err)
	}
	return name
}

// newStore returns a migrated store on a table of its own, closed when tb
// ends, and its pool.
func newStore(tb testing.TB, maxConns int32, opts ...postgresstore.Option) (*postgresstore.Store, *pgxpool.Pool) {
	tb.Helper()
	pool := pgtest.Pool(tb, maxConns)
	table := newSchema(tb, pool) + ".records"
	s := postgresstore.New(pool, append([]postgresstore.Option{postgresstore.WithTable(table)}, opts...)...)
	tb.Cleanup(func() { _ = s.Close() })
	pools.Store(s, pool)
	tables.Store(s, table)
	if err := s.Migrate(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return s, pool
}

// pools and tables remember the pool and table of each store newStore
// made.
var pools, tables sync.Map

func poolOf(tb testing.TB, s *postgresstore.Store) *pgxpool.Pool {
	tb.Helper()
	p, ok := pools.Load(s)
	if !ok {
		tb.Fatal("store not made by newStore")
	}
	return p.(*pgxpool.Pool)
}

func tableOf(tb testing.TB, s *postgresstore.Store) string {
	tb.Helper()
	name, ok := tables.Load(s)
	if !ok {
		tb.Fatal("store not made by newStore")
	}
	return name.(string)
}
