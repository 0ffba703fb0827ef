package postgresstore

import (
	"context"
	_ "embed" // the schema file
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Schema is the DDL of the store's table under its default name
// ([DefaultTable]): the file schema.sql of this package, which
// [Store.Migrate] runs. Give it to your own migration tool instead of
// calling Migrate if you prefer; every statement in it is idempotent.
//
//go:embed schema.sql
var Schema string

// migrateLockKey is the advisory lock Migrate holds while it runs, so that
// servers starting at once do not race CREATE TABLE IF NOT EXISTS (which
// can fail with a unique violation on the catalog when two run together).
// It is "idempot" in ASCII, as a big-endian integer.
const migrateLockKey = 0x6964656d706f74

// Migrate creates the store's table and its index when they are missing,
// and upgrades a table of an earlier schema version (adding the columns of
// abandoned claims), with the DDL of [Schema] under the table name of
// [WithTable]. The store needs it (or Schema applied by hand) before its
// first step on a table of an earlier version. It is safe to call on every
// start, from many servers at once: it runs in one READ COMMITTED
// transaction under a transaction-scoped advisory lock, and changes
// nothing when the table is up to date: it then runs no DDL, which would
// lock the table and queue every call behind the longest transaction
// writing it. It also reads the connection's
// default isolation: when it is REPEATABLE READ or SERIALIZABLE, every
// step of the store asks for READ COMMITTED from then on (see the package
// documentation).
func (s *Store) Migrate(ctx context.Context) error {
	var level string
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var upToDate bool
		if err := tx.QueryRow(ctx, "SELECT current_setting('default_transaction_isolation'), pg_advisory_xact_lock($1)", int64(migrateLockKey)).Scan(&level, nil); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, upToDateSQL, s.table, indexFor(s.cfg.table).Sanitize()).Scan(&upToDate); err != nil || upToDate {
			return err
		}
		_, err := tx.Exec(ctx, schemaFor(s.cfg.table))
		return err
	})
	if err != nil {
		return fmt.Errorf("postgresstore: migrate %s: %w", s.table, err)
	}
	if stricterThanReadCommitted(level) {
		s.readCommitted.Store(true)
	}
	return nil
}

// upToDateSQL answers whether the table $1 has the columns of the current
// schema version and its index $2 exists (both names as the store quotes
// them). Migrate then runs no DDL: CREATE INDEX IF NOT EXISTS takes a
// SHARE lock on the table before it finds the index there, and so waits
// for every transaction that writes the table (a handler's CompleteTx
// among them) while every new claim waits behind it.
const upToDateSQL = `
SELECT to_regclass($2::text) IS NOT NULL AND (
	SELECT count(*) FROM pg_attribute
	WHERE attrelid = to_regclass($1::text) AND NOT attisdropped
	AND attname IN ('keep_micros', 'attempt', 'previous_token')
) = 3`

// schemaFor returns [Schema] for table: the table's name and its index's
// name replaced. The index takes the table's unqualified name with the
// suffix _expires_at_idx, and lives in the table's schema.
func schemaFor(table pgx.Identifier) string {
	index := pgx.Identifier{table[len(table)-1] + "_expires_at_idx"}
	return strings.NewReplacer(
		DefaultTable+"_expires_at_idx", index.Sanitize(),
		DefaultTable, table.Sanitize(),
	).Replace(Schema)
}

// indexFor returns the name of table's index, qualified with the table's
// schema when the table's name is.
func indexFor(table pgx.Identifier) pgx.Identifier {
	index := append(pgx.Identifier(nil), table...)
	index[len(index)-1] += "_expires_at_idx"
	return index
}
