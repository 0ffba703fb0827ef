package mysqlstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// TestConformance runs the shared suite on one store, with its sweeper
// deleting expired rows every 50ms while the cases run: on a table in the
// DSN's database, on a database-qualified table, on connections that
// count found rows instead of changed ones (clientFoundRows), that
// interpolate parameters, that read times as time.Time (parseTime), and
// whose isolation is READ UNCOMMITTED, READ COMMITTED or SERIALIZABLE
// instead of the server's REPEATABLE READ, and, on MariaDB, whose UPDATEs
// assign all columns at once (SIMULTANEOUS_ASSIGNMENT) instead of left to
// right: the statements that move a kept claim's lease read both orders
// the same.
func TestConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		qualified bool
		params    map[string]string
		found     bool // clientFoundRows
		interp    bool // interpolateParams
		parseTime bool
		mariaDB   bool // the case needs MariaDB
	}{
		{name: "default"},
		{name: "database-qualified table", qualified: true},
		{name: "found rows", found: true},
		{name: "interpolated parameters and parsed times", interp: true, parseTime: true},
		{name: "read uncommitted", params: map[string]string{"tx_isolation": "'READ-UNCOMMITTED'"}},
		{name: "read committed", params: map[string]string{"tx_isolation": "'READ-COMMITTED'"}},
		{name: "serializable, found rows", found: true, params: map[string]string{"tx_isolation": "'SERIALIZABLE'"}},
		{name: "simultaneous assignment", mariaDB: true, params: map[string]string{"sql_mode": "CONCAT(@@sql_mode, ',SIMULTANEOUS_ASSIGNMENT')"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.mariaDB && !isMariaDB(t) {
				t.Skip("the server is not MariaDB")
			}
			cfg := mysqltest.Config(t)
			cfg.ClientFoundRows, cfg.InterpolateParams, cfg.ParseTime = tc.found, tc.interp, tc.parseTime
			cfg.Params = tc.params
			table := newTableName()
			if tc.qualified {
				table = cfg.DBName + "." + table
				cfg.DBName = ""
			}
			db := mysqltest.DBFrom(t, cfg, 16)
			s := mysqlstore.New(db, mysqlstore.WithTable(table), mysqlstore.WithSweepInterval(50*time.Millisecond), mysqlstore.WithInvalidationInterval(20*time.Millisecond))
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			storetest.Run(t, func(t *testing.T) store.Store { return s })
		})
	}
}

// isMariaDB reports whether the test server is MariaDB.
func isMariaDB(t *testing.T) bool {
	t.Helper()
	var version string
	if err := mysqltest.DB(t, 1).QueryRowContext(t.Context(), "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(version, "MariaDB")
}
