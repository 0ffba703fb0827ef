package idempotency_test

import (
	"database/sql"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"

	"github.com/grpc-idempotency/idempotency/internal/test/benchtest"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// BenchmarkUnarySQLite is BenchmarkUnary's comparison on the SQLite store
// (a database file of its own per row, sqlitestore.Open's defaults:
// WAL, synchronous FULL), with its floor in the same run:
//
//   - sqlite-executed and sqlite-replay: the Echo handler behind the
//     interceptor, a new key per call or one stored key.
//   - sqlite-floor-*: the store floor (floor_store_bench_test.go), a bare
//     handler that runs SQLite's least for the path, a prepared SELECT
//     for a replay, an INSERT … ON CONFLICT DO NOTHING and an UPDATE for
//     an executed call, its writes one at a time as the store's write
//     gate lets them: divide the sqlite rows by them.
//   - sqlite-ceiling-*: the store's steps with the same concurrency and no
//     gRPC.
//
// writes/op counts the write transactions committed on the database per
// call (a commit hook on every connection): 2 for an executed call (the
// claim and the completion), 0 for a replay, which is one read statement.
// The store's sweeper is off (WithSweepInterval(0)), so that every write
// counted is a call's.
func BenchmarkUnarySQLite(b *testing.B) {
	for _, path := range []string{"executed", "replay"} {
		replay := path == "replay"
		b.Run("sqlite-"+path, func(b *testing.B) {
			s := benchSQLite(b)
			client := serve(b, s)
			benchtest.ForCallers(b, func(b *testing.B, callers int) {
				benchCalls(b, client, callers, replay, sqliteWrites.reset)
				sqliteWrites.report(b)
			})
		})
		b.Run("sqlite-floor-"+path, func(b *testing.B) {
			db := benchSQLiteDB(b)
			table := "floor" // a database file of the row's own
			create := "CREATE TABLE `" + table + "` (`key` BLOB NOT NULL PRIMARY KEY, data BLOB) WITHOUT ROWID"
			claim := "INSERT INTO `" + table + "` (`key`) VALUES (?) ON CONFLICT DO NOTHING"
			fs := newSQLFloor(b, db, table, create, claim, true)
			benchFloor(b, fs, replay, floorCounter{
				reset:  func(*testing.B) { sqliteWrites.reset() },
				report: sqliteWrites.report,
			})
		})
		b.Run("sqlite-ceiling-"+path, func(b *testing.B) {
			s := benchSQLite(b)
			benchtest.ForCallers(b, func(b *testing.B, callers int) {
				benchStore(b, s, callers, replay, sqliteWrites.reset)
				sqliteWrites.report(b)
			})
		})
	}
}

// benchSQLite returns a migrated store on a fresh database file, its
// sweeper off.
func benchSQLite(b *testing.B) *sqlitestore.Store {
	b.Helper()
	s := sqlitestore.New(benchSQLiteDB(b), sqlitestore.WithSweepInterval(0))
	b.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	return s
}

// benchSQLiteDB opens a fresh database file with sqlitestore.Open, its
// connections counting their commits in sqliteWrites, closed when b ends.
func benchSQLiteDB(b *testing.B) *sql.DB {
	b.Helper()
	sqliteWrites.install()
	db, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// sqliteWrites counts the write transactions committed on the SQLite
// connections the process opens once it is installed: SQLite calls a
// commit hook for a transaction that wrote, never for a read.
var sqliteWrites commitCounter

// commitCounter counts commits through a commit hook on every connection
// of the sqlite driver.
type commitCounter struct {
	once    sync.Once
	commits atomic.Int64
}

// install registers the hook on the connections the driver opens from
// now on.
func (c *commitCounter) install() {
	c.once.Do(func() {
		sqlite.RegisterConnectionHook(func(conn sqlite.ExecQuerierContext, _ string) error {
			if h, ok := conn.(sqlite.HookRegisterer); ok {
				h.RegisterCommitHook(func() int32 {
					c.commits.Add(1)
					return 0 // commit
				})
			}
			return nil
		})
	})
}

// reset forgets the commits counted so far.
func (c *commitCounter) reset() { c.commits.Store(0) }

// report reports the commits since the last reset per call, writes/op.
func (c *commitCounter) report(b *testing.B) {
	b.ReportMetric(float64(c.commits.Load())/float64(b.N), "writes/op")
}
