package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/integration/internal/killtest/killpoint"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
)

// openStore connects the idempotency store of kind on url. The SQL stores'
// tables are made by the test beforehand.
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
	}
	return nil, nil, fmt.Errorf("-store %q: want redis, postgres or mysql", kind)
}

// effects records the handler's side effect outside the process: one
// entry per execution, under the call's key.
type effects struct {
	record func(ctx context.Context, key, pid string) error
	close  func()
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
			close: func() { _ = rdb.Close() },
		}, nil
	case "postgres":
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			return nil, err
		}
		insert := "INSERT INTO " + table + " (key, pid) VALUES ($1, $2)"
		return &effects{
			record: func(ctx context.Context, key, pid string) error {
				_, err := pool.Exec(ctx, insert, key, pid)
				return err
			},
			close: pool.Close,
		}, nil
	}
	return nil, fmt.Errorf("-effect %q: want redis or postgres", kind)
}
