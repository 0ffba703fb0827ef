package postgresstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// databaseURL returns the URL of a fresh schema in the package's test
// database (see TestMain): every run of an example starts empty.
func databaseURL() string {
	base, err := pgtest.DatabaseURL()
	if err != nil {
		return "unavailable: " + err.Error()
	}
	conn, err := pgx.Connect(context.Background(), base)
	if err != nil {
		return "unavailable: " + err.Error()
	}
	defer conn.Close(context.Background())
	schema := "example_" + strings.ToLower(rand.Text()[:12])
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		return "unavailable: " + err.Error()
	}
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// createLedger creates the example's ledger tables.
func createLedger(ctx context.Context, db *pgxpool.Pool) error {
	_, err := db.Exec(ctx, `
CREATE TABLE charges (id bigserial PRIMARY KEY, customer text NOT NULL, amount_cents bigint NOT NULL);
CREATE TABLE declines (id bigserial PRIMARY KEY, customer text NOT NULL, amount_cents bigint NOT NULL)`)
	if err != nil {
		return fmt.Errorf("creating the ledger: %w", err)
	}
	return nil
}
