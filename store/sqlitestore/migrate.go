package sqlitestore

import (
	"context"
	_ "embed" // the schema file
	"fmt"
	"strings"
)

// Schema is the DDL of the store's table under its default name
// ([DefaultTable]): the file schema.sql of this package, which
// [Store.Migrate] runs. Give it to your own migration tool instead of
// calling Migrate if you prefer; every statement in it is idempotent.
//
//go:embed schema.sql
var Schema string

// Migrate creates the store's table and its index when they are missing,
// with the DDL of [Schema] under the table name of [WithTable]. It is safe
// to call on every start, from many processes at once: the statements run
// in one transaction under SQLite's write lock, and change nothing when
// the table is there.
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

// schemaFor returns [Schema] for table: the table's name and its index's
// name replaced. The index takes the table's name with the suffix
// _expires_at_idx, in the table's schema; SQLite names the table of
// CREATE INDEX … ON without its schema.
func schemaFor(table []string) string {
	name := table[len(table)-1]
	index := quoteIdent(name + "_expires_at_idx")
	if len(table) == 2 {
		index = quoteIdent(table[0]) + "." + index
	}
	return strings.NewReplacer(
		"INDEX IF NOT EXISTS "+DefaultTable+"_expires_at_idx", "INDEX IF NOT EXISTS "+index,
		"ON "+DefaultTable+" (", "ON "+quoteIdent(name)+" (",
		"CREATE TABLE IF NOT EXISTS "+DefaultTable, "CREATE TABLE IF NOT EXISTS "+quoteTable(table),
	).Replace(Schema)
}
