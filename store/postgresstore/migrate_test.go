package postgresstore_test

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestMigrate runs storetest's migration suite on a table of its own.
func TestMigrate(t *testing.T) {
	t.Parallel()
	storetest.RunMigrate(t, func(t *testing.T, n int) []storetest.MigrateStore {
		table := newSchema(t, pgtest.Pool(t, 1)) + ".records"
		stores := make([]storetest.MigrateStore, n)
		for i := range stores {
			s := postgresstore.New(pgtest.Pool(t, 1), postgresstore.WithTable(table), postgresstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = s.Close() })
			stores[i] = s
		}
		return stores
	})
}

// TestMigrateTableNames: Migrate creates exactly the table WithTable names,
// quoted as written, with its index, in the named schema.
func TestMigrateTableNames(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, 2)
	for _, tc := range []struct{ name, schema, table string }{
		{"plain", "", "plain_records"},
		{"mixed case", "", "Mixed Case"},
		{"quote and semicolon", "", `x"; DROP TABLE y; --`},
		{"schema-qualified", newSchema(t, pool), "records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.table
			if tc.schema != "" {
				name = tc.schema + "." + tc.table
			}
			s := postgresstore.New(pool, postgresstore.WithTable(name), postgresstore.WithSweepInterval(0))
			defer s.Close()
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			want := pgx.Identifier{tc.table}
			if tc.schema != "" {
				want = pgx.Identifier{tc.schema, tc.table}
			}
			var indexes int
			err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_indexes WHERE schemaname = coalesce(nullif($1, ''), current_schema()) AND tablename = $2 AND indexdef LIKE '%(expires_at)'", tc.schema, tc.table).Scan(&indexes)
			if err != nil || indexes != 1 {
				t.Fatalf("expires_at index of %s: %d (%v), want 1", want.Sanitize(), indexes, err)
			}
			if _, err := pool.Exec(t.Context(), "SELECT key FROM "+want.Sanitize()); err != nil {
				t.Fatalf("table %s: %v", want.Sanitize(), err)
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
	if string(b) != postgresstore.Schema {
		t.Fatal("postgresstore.Schema differs from schema.sql")
	}
}

// TestSchemaByHand: applying Schema with psql-style execution (what a
// migration tool does) gives a table the store works on.
func TestSchemaByHand(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, 1)
	schema := newSchema(t, pool)
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(t.Context(), "SET search_path TO "+pgx.Identifier{schema}.Sanitize()+"; "+postgresstore.Schema)
	conn.Release()
	if err != nil {
		t.Fatal(err)
	}
	s := postgresstore.New(pool, postgresstore.WithTable(schema+"."+postgresstore.DefaultTable), postgresstore.WithSweepInterval(0))
	defer s.Close()
	if c, err := s.Claim(t.Context(), "k", []byte("fp"), 60e9, store.ClaimOptions{}); err != nil || !c.Won() {
		t.Fatalf("Claim on the table of Schema: %v, won=%v", err, c.Won())
	}
}

// TestWithTableInvalid: New panics on a table name it cannot quote.
func TestWithTableInvalid(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, 1)
	for _, name := range []string{"", "a.", ".a", "a.b.c"} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("New with WithTable(%q) did not panic", name)
				}
			}()
			postgresstore.New(pool, postgresstore.WithTable(name))
		})
	}
}
