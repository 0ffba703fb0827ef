package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/grpc-idempotency/idempotency"
	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/integration/internal/killtest/killpoint"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// openServed opens the store the server runs on: the store of kind on url,
// or, when fromSQLite names a SQLite file, a [migratestore] from the
// sqlitestore on that file to it, as a deploy that moves a service off
// SQLite runs (docs/stores.md, "Which store to start with").
func openServed(ctx context.Context, kind, url, table, fromSQLite string) (store.Store, func(), error) {
	to, closeTo, err := openStore(ctx, kind, url, table)
	if err != nil || fromSQLite == "" {
		return to, closeTo, err
	}
	from, closeFrom, err := openStore(ctx, "sqlite", fromSQLite, "")
	if err != nil {
		closeTo()
		return nil, nil, err
	}
	return migratestore.New(from, to), func() { closeTo(); closeFrom() }, nil
}

// openStore connects the idempotency store of kind on url (for sqlite, the
// path of the database file). The SQL stores' tables are made by the test
// beforehand; a SQLite table is the store's default.
func openStore(ctx context.Context, kind, url, table string) (store.Store, func(), error) {
	switch kind {
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: url})
		s := redisstore.New(rdb)
		return s, func() { _ = rdb.Close() }, nil
	case "postgres":
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			return nil, nil, err
		}
		s := postgresstore.New(pool, postgresstore.WithTable(table), postgresstore.WithSweepInterval(0))
		return s, func() { _ = s.Close(); pool.Close() }, nil
	case "mysql":
		db, err := sql.Open("mysql", url)
		if err != nil {
			return nil, nil, err
		}
		s := mysqlstore.New(db, mysqlstore.WithTable(table), mysqlstore.WithSweepInterval(0))
		return s, func() { _ = s.Close(); _ = db.Close() }, nil
	case "sqlite":
		db, err := sqlitestore.Open(url)
		if err != nil {
			return nil, nil, err
		}
		s := sqlitestore.New(db, sqlitestore.WithSweepInterval(0))
		return s, func() { _ = s.Close(); _ = db.Close() }, nil
	}
	return nil, nil, fmt.Errorf("-store %q: want redis, postgres, mysql or sqlite", kind)
}

// effects records the handler's side effect outside the process: one
// entry per execution, under the call's key.
type effects struct {
	record func(ctx context.Context, key, pid string) error
	// first returns the process ID of the first execution of key, and
	// whether there was one.
	first func(ctx context.Context, key string) (pid string, ok bool, err error)
	close func()
}

// recoverCharge is the method's [idempotency.RecoverFunc]: it asks the
// place of the side effects what the abandoned attempt did. A recorded
// side effect is the charge made: its answer is the process ID that made
// it. None: nothing was charged, and the handler runs.
func (e *effects) recoverCharge(ctx context.Context, req proto.Message) (proto.Message, error) {
	pid, ok, err := e.first(ctx, req.(*wrapperspb.StringValue).GetValue())
	switch {
	case err != nil:
		return nil, status.Error(codes.Unavailable, err.Error()) // retryable: the key stays abandoned
	case !ok:
		return nil, idempotency.ErrRerun
	}
	return wrapperspb.String(pid), nil
}

// openEffects connects the side effect's place of kind on url.
func openEffects(ctx context.Context, kind, url, table string) (*effects, error) {
	switch kind {
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: url})
		return &effects{
			record: func(ctx context.Context, key, pid string) error {
				return rdb.RPush(ctx, killpoint.EffectsList(key), pid).Err()
			},
			first: func(ctx context.Context, key string) (string, bool, error) {
				pid, err := rdb.LIndex(ctx, killpoint.EffectsList(key), 0).Result()
				if errors.Is(err, redis.Nil) {
					return "", false, nil
				}
				return pid, err == nil, err
			},
			close: func() { _ = rdb.Close() },
		}, nil
	case "postgres":
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			return nil, err
		}
		insert := "INSERT INTO " + table + " (key, pid) VALUES ($1, $2)"
		first := "SELECT pid FROM " + table + " WHERE key = $1 LIMIT 1"
		return &effects{
			record: func(ctx context.Context, key, pid string) error {
				_, err := pool.Exec(ctx, insert, key, pid)
				return err
			},
			first: func(ctx context.Context, key string) (pid string, ok bool, err error) {
				err = pool.QueryRow(ctx, first, key).Scan(&pid)
				if errors.Is(err, pgx.ErrNoRows) {
					return "", false, nil
				}
				return pid, err == nil, err
			},
			close: pool.Close,
		}, nil
	case "sqlite":
		db, err := sqlitestore.Open(url)
		if err != nil {
			return nil, err
		}
		return sqliteEffects(db, table), nil
	}
	return nil, fmt.Errorf("-effect %q: want redis, postgres or sqlite", kind)
}

// sqliteEffects records the side effects as rows of table in the SQLite
// file of db, each one committed on its own, as the PostgreSQL ones are:
// a process killed after the handler's side effect has it on the file.
func sqliteEffects(db *sql.DB, table string) *effects {
	insert := "INSERT INTO " + table + " (key, pid) VALUES (?, ?)"
	first := "SELECT pid FROM " + table + " WHERE key = ? ORDER BY rowid LIMIT 1"
	return &effects{
		record: func(ctx context.Context, key, pid string) error {
			_, err := db.ExecContext(ctx, insert, key, pid)
			return err
		},
		first: func(ctx context.Context, key string) (pid string, ok bool, err error) {
			err = db.QueryRowContext(ctx, first, key).Scan(&pid)
			if errors.Is(err, sql.ErrNoRows) {
				return "", false, nil
			}
			return pid, err == nil, err
		},
		close: func() { _ = db.Close() },
	}
}
