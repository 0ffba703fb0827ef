package sqlitestore

import (
	"context"
	_ "embed" // the schema file
	"fmt"
	"strings"
)

// Schema is the DDL of the store's table and of its purge log under their
// default names ([DefaultTable], and idempotency_records_purges): the file
// schema.sql of this package, which
// [Store.Migrate] runs. Give it to your own migration tool instead of
// calling Migrate if you prefer; every statement in it is idempotent.
//
//go:embed schema.sql
var Schema string

// Migrate creates the store's table, its purge log and their indexes when
// they are missing, with the DDL of [Schema] under the table name of
// [WithTable]. It is safe to call on every start, from many processes at
// once: the statements run in one transaction under SQLite's write lock,
// and change nothing when the tables are there. On a file made by an
// earlier release it adds the purge log, which [Store.Purge] writes and
// [Store.Invalidations] reads.
func (s *Store) Migrate(ctx context.Context) error {
	err := s.write(ctx, func(ctx context.Context) error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, schemaFor(s.cfg.table)); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate %s: %w", s.table, err)
	}
	return nil
}

// schemaFor returns [Schema] for table: the names of the table, of its
// purge log (the table's name and _purges, in its schema) and of their
// indexes replaced. An index takes its table's name with a suffix, in the
// table's schema; SQLite names the table of CREATE INDEX … ON without its
// schema.
func schemaFor(table []string) string {
	name := table[len(table)-1]
	index := func(suffix string) string {
		ix := quoteIdent(name + suffix)
		if len(table) == 2 {
			ix = quoteIdent(table[0]) + "." + ix
		}
		return ix
	}
	log := logTable(table)
	return strings.NewReplacer(
		// The log's names first: the table's are their prefixes.
		"INDEX IF NOT EXISTS "+DefaultTable+"_purges_purged_at_idx", "INDEX IF NOT EXISTS "+index("_purges_purged_at_idx"),
		"ON "+DefaultTable+"_purges (", "ON "+quoteIdent(log[len(log)-1])+" (",
		"CREATE TABLE IF NOT EXISTS "+DefaultTable+"_purges", "CREATE TABLE IF NOT EXISTS "+quoteTable(log),
		"INDEX IF NOT EXISTS "+DefaultTable+"_expires_at_idx", "INDEX IF NOT EXISTS "+index("_expires_at_idx"),
		"ON "+DefaultTable+" (", "ON "+quoteIdent(name)+" (",
		"CREATE TABLE IF NOT EXISTS "+DefaultTable, "CREATE TABLE IF NOT EXISTS "+quoteTable(table),
	).Replace(Schema)
}

// logTable returns the name of the purge log of table: the table's name
// and _purges, in the table's schema.
func logTable(table []string) []string {
	log := append([]string(nil), table...)
	log[len(log)-1] += "_purges"
	return log
}
