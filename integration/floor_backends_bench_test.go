package idempotency_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// The floor stores of the floor rows (floor_store_bench_test.go), one per
// backend, each on a keyspace or table of its own with nothing but a key
// and the stored bytes.

// floorLease is the lifetime of a Redis floor claim, as the interceptor's
// default lease would set it, and floorRetention that of a stored answer.
const (
	floorLease     = time.Minute
	floorRetention = time.Hour
)

// redisFloor is the Redis floor: GET, SET NX PX, SET PX.
type redisFloor struct{ rdb *redis.Client }

func (f redisFloor) Read(ctx context.Context, key string) ([]byte, error) {
	data, err := f.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, errFloorMissing
	}
	return data, err
}

func (f redisFloor) Claim(ctx context.Context, key string) (bool, error) {
	return f.rdb.SetNX(ctx, key, "", floorLease).Result()
}

func (f redisFloor) Complete(ctx context.Context, key string, data []byte) error {
	return f.rdb.Set(ctx, key, data, floorRetention).Err()
}

// postgresFloor is the PostgreSQL floor: a SELECT, an INSERT that does
// nothing on a conflict and an UPDATE, each by the primary key, on a
// table with the store's fillfactor; pgx prepares each once per
// connection (its default statement cache).
type postgresFloor struct {
	pool                  *pgxpool.Pool
	read, claim, complete string
}

// newPostgresFloor creates a floor table on a pool as benchPostgres', with
// a round-trip counter on the table's statements.
func newPostgresFloor(b *testing.B) (*postgresFloor, *pgtest.RoundTrips) {
	b.Helper()
	table, trips, pool := benchPostgresPool(b, "floor_")
	if _, err := pool.Exec(b.Context(), "CREATE TABLE "+table+" (key bytea NOT NULL PRIMARY KEY, data bytea) WITH (fillfactor = 80)"); err != nil {
		b.Fatal(err)
	}
	return &postgresFloor{
		pool:     pool,
		read:     "SELECT data FROM " + table + " WHERE key = $1",
		claim:    "INSERT INTO " + table + " (key) VALUES ($1) ON CONFLICT DO NOTHING",
		complete: "UPDATE " + table + " SET data = $2 WHERE key = $1",
	}, trips
}

func (f *postgresFloor) Read(ctx context.Context, key string) ([]byte, error) {
	var data []byte
	err := f.pool.QueryRow(ctx, f.read, []byte(key)).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && data == nil) {
		return nil, errFloorMissing
	}
	return data, err
}

func (f *postgresFloor) Claim(ctx context.Context, key string) (bool, error) {
	tag, err := f.pool.Exec(ctx, f.claim, []byte(key))
	return tag.RowsAffected() == 1, err
}

func (f *postgresFloor) Complete(ctx context.Context, key string, data []byte) error {
	_, err := f.pool.Exec(ctx, f.complete, []byte(key), data)
	return err
}

// sqlFloor is the floor of a database/sql store (MySQL, SQLite): three
// statements prepared once on the pool. gate, when not nil, lets one of
// its writes run at a time, as sqlitestore's write gate does (SQLite's
// writers otherwise queue in its busy handler, which sleeps).
type sqlFloor struct {
	read, claim, complete *sql.Stmt
	gate                  chan struct{}
}

// newSQLFloor creates table with create and prepares the floor's
// statements on db; claim is the dialect's insert that does nothing when
// the key has a row. The statements quote the table and the key column
// with backquotes, which both MySQL and SQLite read.
func newSQLFloor(b *testing.B, db *sql.DB, table, create, claim string, gated bool) *sqlFloor {
	b.Helper()
	ctx := b.Context()
	if _, err := db.ExecContext(ctx, create); err != nil {
		b.Fatal(err)
	}
	prepare := func(q string) *sql.Stmt {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		return st
	}
	f := &sqlFloor{
		read:     prepare("SELECT data FROM `" + table + "` WHERE `key` = ?"),
		claim:    prepare(claim),
		complete: prepare("UPDATE `" + table + "` SET data = ? WHERE `key` = ?"),
	}
	if gated {
		f.gate = make(chan struct{}, 1)
	}
	return f
}

// newMySQLFloor creates a floor table on a pool as benchMySQL's, with a
// round-trip counter on the table's statements.
func newMySQLFloor(b *testing.B) (*sqlFloor, *mysqltest.RoundTrips) {
	b.Helper()
	table, trips, db := benchMySQLDB(b, "floor_")
	create := "CREATE TABLE `" + table + "` (`key` VARBINARY(255) NOT NULL PRIMARY KEY, data LONGBLOB NULL) ENGINE = InnoDB"
	claim := "INSERT IGNORE INTO `" + table + "` (`key`) VALUES (?)"
	return newSQLFloor(b, db, table, create, claim, false), trips
}

func (f *sqlFloor) Read(ctx context.Context, key string) ([]byte, error) {
	var data []byte
	err := f.read.QueryRowContext(ctx, key).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && data == nil) {
		return nil, errFloorMissing
	}
	return data, err
}

func (f *sqlFloor) Claim(ctx context.Context, key string) (bool, error) {
	var n int64
	err := f.write(ctx, func() error {
		res, err := f.claim.ExecContext(ctx, key)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n == 1, err
}

func (f *sqlFloor) Complete(ctx context.Context, key string, data []byte) error {
	return f.write(ctx, func() error {
		_, err := f.complete.ExecContext(ctx, data, key)
		return err
	})
}

// write runs one write statement, behind the gate when f has one.
func (f *sqlFloor) write(ctx context.Context, run func() error) error {
	if f.gate != nil {
		select {
		case f.gate <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-f.gate }()
	}
	return run()
}

var (
	_ floorStore = redisFloor{}
	_ floorStore = (*postgresFloor)(nil)
	_ floorStore = (*sqlFloor)(nil)
)
