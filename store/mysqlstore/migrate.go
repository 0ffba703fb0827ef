package mysqlstore

import (
	"context"
	"crypto/sha256"
	_ "embed" // the schema file
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Schema is the DDL of the store's table under its default name
// ([DefaultTable]): the file schema.sql of this package, which
// [Store.Migrate] runs. Give it to your own migration tool instead of
// calling Migrate if you prefer, with [PurgeLog], the table's purge log;
// its one statement is idempotent.
//
//go:embed schema.sql
var Schema string

// Upgrade is the DDL that brings a table of schema version 1, which
// [Schema] created before version 2, to version 2 (the columns of claims
// kept beyond their lease, [store.ClaimOptions.Keep]), under the default
// table name: the file upgrade.sql of this package. [Store.Migrate] runs
// it, one column at a time, when a column is missing; give it to your own
// migration tool instead if you prefer. Run it once: it is not
// idempotent.
//
//go:embed upgrade.sql
var Upgrade string

// PurgeLog is the DDL of the table's purge log under its default name
// (idempotency_records_purges), part of schema version 3: the file
// purgelog.sql of this package, which [Store.Migrate] runs after
// [Schema]. [Store.Purge] writes it and [Store.Invalidations] reads it.
// Give it to your own migration tool with Schema if you prefer, and to a
// table made by an earlier release; its one statement is idempotent.
//
//go:embed purgelog.sql
var PurgeLog string

// Migrate creates the store's table when it is missing, with the DDL of
// [Schema] under the table name of [WithTable], adds the columns of
// [Upgrade] to a table that lacks them (made by an earlier release), and
// creates the table's purge log ([PurgeLog]) when it is missing. It
// is safe to call on every start, from many servers at once: CREATE
// TABLE IF NOT EXISTS is one atomic statement, and changes nothing when
// the table is there; a column is looked for with a SELECT of it that
// reads no row, added with one ALTER TABLE only when the table lacks it,
// and a server that finds it added by another meanwhile (a duplicate
// column error) goes on. The ALTER TABLE, run once per table, is done in
// place on MySQL 8.0.12 and later and MariaDB 10.3 and later, but waits
// for the transactions that use the table, and the statements on the
// table wait for it meanwhile: upgrade when the servers are quiet, or
// with your own tool.
//
// Upgrade before any server claims with Keep: a server of an earlier
// release that takes over an expired row does not reset lease_until,
// and a row it took over after a claim with Keep would then read as
// abandoned while its handler runs.
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
	if err := s.addColumns(ctx); err != nil {
		return fmt.Errorf("mysqlstore: migrate %s: %w", s.table, err)
	}
	if _, err := s.db.ExecContext(ctx, purgeLogFor(s.cfg.table)); err != nil {
		return fmt.Errorf("mysqlstore: migrate %s: purge log: %w", s.table, err)
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

// MySQL error numbers of a missing or a duplicate column.
const (
	errBadField        = 1054 // ER_BAD_FIELD_ERROR
	errDuplicateColumn = 1060 // ER_DUP_FIELDNAME
)

// addColumns adds each column of [Upgrade] that the table lacks. A column
// is looked for with a SELECT of it that reads no row, which names the
// table exactly as the store's statements do (quoting, database,
// lower_case_table_names), rather than through information_schema.
func (s *Store) addColumns(ctx context.Context) error {
	for _, c := range upgradeColumns() {
		rows, err := s.db.QueryContext(ctx, "SELECT "+c.name+" FROM "+s.table+" LIMIT 0")
		if err == nil {
			err = errors.Join(rows.Err(), rows.Close())
		}
		if err == nil {
			continue
		}
		if mysqlErr(err) != errBadField {
			return err
		}
		_, err = s.db.ExecContext(ctx, "ALTER TABLE "+s.table+" ADD COLUMN "+c.def)
		if err != nil && mysqlErr(err) != errDuplicateColumn { // added by another server meanwhile
			return fmt.Errorf("add column %s: %w", c.name, err)
		}
	}
	return nil
}

// column is one ADD COLUMN of [Upgrade]: the column's name, and its
// definition (the name first).
type column struct{ name, def string }

// upgradeColumns returns the columns [Upgrade] adds, in its order.
func upgradeColumns() []column {
	var cols []column
	for _, line := range strings.Split(Upgrade, "\n") {
		def, ok := strings.CutPrefix(strings.TrimSpace(line), "ADD COLUMN ")
		if !ok {
			continue
		}
		def = strings.TrimRight(def, ",;")
		name, _, _ := strings.Cut(def, " ")
		cols = append(cols, column{name: name, def: def})
	}
	return cols
}

// schemaFor returns [Schema] for table: the table's name replaced. The
// index's name is the table's own (MySQL names indexes per table).
func schemaFor(table []string) string {
	return strings.Replace(Schema, "CREATE TABLE IF NOT EXISTS "+DefaultTable, "CREATE TABLE IF NOT EXISTS "+quoteTable(table), 1)
}

// purgeLogFor returns [PurgeLog] for table: the log's name replaced.
func purgeLogFor(table []string) string {
	return strings.Replace(PurgeLog, "CREATE TABLE IF NOT EXISTS "+DefaultTable+"_purges", "CREATE TABLE IF NOT EXISTS "+quoteTable(logTable(table)), 1)
}

// logTable returns the name of the purge log of table, in the table's
// database: the table's name and _purges, or, when that is longer than
// MySQL's 64 bytes, idempotency_purges_ and 16 hex digits of a SHA-256 of
// the table's name.
func logTable(table []string) []string {
	log := append([]string(nil), table...)
	name := log[len(log)-1]
	if len(name)+len("_purges") <= 64 {
		log[len(log)-1] = name + "_purges"
	} else {
		sum := sha256.Sum256([]byte(name))
		log[len(log)-1] = "idempotency_purges_" + hex.EncodeToString(sum[:8])
	}
	return log
}
