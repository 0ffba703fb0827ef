package mysqlstore_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestMigrateAddsPurgeLog: on a table of schema version 2 (made by an
// earlier release, without a purge log), a purge fails and deletes
// nothing; four servers migrating it at once all succeed, and a purge
// through one then reaches another's subscription.
func TestMigrateAddsPurgeLog(t *testing.T) {
	t.Parallel()
	db := mysqltest.DB(t, 2)
	table := newTableName()
	if _, err := db.ExecContext(t.Context(), strings.Replace(mysqlstore.Schema, "CREATE TABLE IF NOT EXISTS "+mysqlstore.DefaultTable, "CREATE TABLE "+table, 1)); err != nil {
		t.Fatal(err)
	}
	stores := serversOn(t, table, 4, mysqlstore.WithInvalidationInterval(10*time.Millisecond))
	storetest.CheckLogAdded(t, stores[0], stores[1], func(t *testing.T) { migrateAll(t, stores, "a version-2 table") })
}

// TestPurgeLogIsTheFile: PurgeLog is purgelog.sql, byte for byte.
func TestPurgeLogIsTheFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("purgelog.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != mysqlstore.PurgeLog {
		t.Fatal("mysqlstore.PurgeLog differs from purgelog.sql")
	}
}
