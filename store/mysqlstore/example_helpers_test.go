package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
)

// databaseDSN returns the DSN of a fresh database beside the package's
// test database (see TestMain): every run of an example starts empty.
func databaseDSN() string {
	dsn, err := mysqltest.ExtraDatabase()
	if err != nil {
		return "unavailable: " + err.Error()
	}
	return dsn
}

// createLedger creates the example's ledger tables.
func createLedger(ctx context.Context, db *sql.DB) error {
	for _, ddl := range []string{
		"CREATE TABLE charges (id BIGINT AUTO_INCREMENT PRIMARY KEY, customer VARCHAR(200) NOT NULL, amount_cents BIGINT NOT NULL)",
		"CREATE TABLE declines (id BIGINT AUTO_INCREMENT PRIMARY KEY, customer VARCHAR(200) NOT NULL, amount_cents BIGINT NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("creating the ledger: %w", err)
		}
	}
	return nil
}
