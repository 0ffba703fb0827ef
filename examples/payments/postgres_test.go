package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// The -postgres mode tells the same story with the ledger and the store in
// PostgreSQL, plus the chapter of a server that commits and dies before
// answering, and leaves nothing behind in the database.
func TestRunTellsTheStoryOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	var out bytes.Buffer
	cfg := config{PostgresURL: url, Logs: t.Output(), LogLevel: slog.LevelDebug}
	if err := run(t.Context(), cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	wantMarks(t, out.String(), "PostgreSQL store and ledger")
	for _, mark := range []string{
		"A executed 1; B replayed 1",
		"the ledger holds 1 charge(s) for dave, 42.00 paid",
		"Ledger: 3 charges, 66.99 in all",
	} {
		if !strings.Contains(out.String(), mark) {
			t.Errorf("output lacks %q\n%s", mark, out.String())
		}
	}
	var schemas int
	err := pgtest.Pool(t, 1).QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'payments_demo_%'").Scan(&schemas)
	if err != nil || schemas != 0 {
		t.Fatalf("%d demo schemas left in the database (%v), want 0", schemas, err)
	}
}

func TestRunFailsWithoutPostgres(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := run(t.Context(), config{PostgresURL: "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2"}, &out)
	if err == nil || !strings.Contains(err.Error(), "postgres") {
		t.Fatalf("run = %v, want an error naming PostgreSQL", err)
	}
}

// TestMain drops the test databases of PostgreSQL and MySQL, if a test
// made them.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := mysqltest.Drop(); err != nil {
		fmt.Fprintf(os.Stderr, "mysqltest: %v\n", err)
	}
	pgtest.Exit(code)
}
