package mysqlstore

import (
	"context"
	_ "embed" // the schema file
	"errors"
	"fmt"
	"strings"
)

// Schema is the DDL of the store's table under its default name
// ([DefaultTable]): the file schema.sql of this package, which
// [Store.Migrate] runs. Give it to your own migration tool instead of
// calling Migrate if you prefer; its one statement is idempotent.
//
//go:embed schema.sql
var Schema string

// Migrate creates the store's table when it is missing, with the DDL of
// [Schema] under the table name of [WithTable]. It is safe to call on
// every start, from many servers at once: CREATE TABLE IF NOT EXISTS is
// one atomic statement, and changes nothing when the table is there.
//
// It also checks that db's connections run in autocommit mode, which every
// step of the store needs (each is a transaction of its own), and returns
// an error when one does not; it reads the server's max_allowed_packet
// ([Store.MaxRecordBytes]); and it learns which variable holds the
// session's isolation level on the server, which the claim's read returns
// (the first claim learns it otherwise).
func (s *Store) Migrate(ctx context.Context) error {
	var autocommit, packet int64
	if err := s.db.QueryRowContext(ctx, "SELECT @@autocommit, @@max_allowed_packet").Scan(&autocommit, &packet); err != nil {
		return fmt.Errorf("mysqlstore: migrate %s: %w", s.table, err)
	}
	if autocommit != 1 {
		return fmt.Errorf("mysqlstore: migrate %s: %w", s.table, errNoAutocommit)
	}
	if _, err := s.db.ExecContext(ctx, schemaFor(s.cfg.table)); err != nil {
		return fmt.Errorf("mysqlstore: migrate %s: %w", s.table, err)
	}
	if _, err := s.readSQL(ctx); err != nil {
		return fmt.Errorf("mysqlstore: migrate %s: %w", s.table, err)
	}
	s.maxPacket.Store(packet)
	return nil
}

// packetMargin is what a Complete's packet holds beside the outcome: the
// key, the token, the retention and the statement's framing.
const packetMargin = 1 << 10

// MaxRecordBytes implements [store.RecordLimiter]: the largest outcome
// Complete stores, the server's max_allowed_packet less 1 KiB for the
// rest of the statement, or 0 before [Store.Migrate] has read it. An
// outcome travels in one packet, which the server refuses when it is
// larger than max_allowed_packet: [idempotency.NewServer] refuses at
// start-up a WithMaxResponseBytes that lets an outcome be larger, so run
// Migrate before it. The limit is read once: a max_allowed_packet lowered
// later is not seen.
func (s *Store) MaxRecordBytes() int {
	if p := s.maxPacket.Load(); p > packetMargin {
		return int(p - packetMargin)
	}
	return 0
}

// errNoAutocommit is Migrate's error for a pool whose connections do not
// commit each statement.
var errNoAutocommit = errors.New("the pool's connections run with autocommit off (autocommit=0 in the DSN, or init_connect): each step of the store must commit on its own")

// schemaFor returns [Schema] for table: the table's name replaced. The
// index's name is the table's own (MySQL names indexes per table).
func schemaFor(table []string) string {
	return strings.Replace(Schema, "CREATE TABLE IF NOT EXISTS "+DefaultTable, "CREATE TABLE IF NOT EXISTS "+quoteTable(table), 1)
}
