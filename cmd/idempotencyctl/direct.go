package main

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/admin"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/sqlitestore"
)

// openDirect opens the store the flags name and serves the admin service
// over it in process: an idempotency.Server over the store, with the
// descriptors of --descriptor-set, and admin.NewService over that server,
// called without a network. Its log lines (every purge, a store's
// failure) go to stderr.
func (f *connFlags) openDirect(ctx context.Context, stderr io.Writer) (*conn, error) {
	var opts []idempotency.ServerOption
	if f.descriptorSet != "" {
		files, err := loadDescriptorSet(f.descriptorSet)
		if err != nil {
			return nil, err
		}
		opts = append(opts, idempotency.WithDescriptors(files))
	}
	st, where, closeStore, at, err := f.openStore(ctx)
	if err != nil {
		return nil, err
	}
	srv := idempotency.NewServer(st, opts...)
	principal := directPrincipal()
	svc := admin.NewService(srv,
		func(context.Context, string) (string, error) { return principal, nil },
		admin.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))))
	return &conn{backend: svc, where: where, direct: true, place: at, close: closeStore}, nil
}

// directPrincipal names the operator of a direct access in the purge log
// lines: the store's credentials are the only authorization there is.
func directPrincipal() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return "idempotencyctl direct (" + name + ")"
}

// openStore opens the store the flags name, and returns it, its name for
// messages (never its URL, which may hold a password), its closer, and the
// place in it the flags name.
func (f *connFlags) openStore(ctx context.Context) (store.Store, string, func(), *place, error) {
	switch {
	case f.redis != "":
		o, err := redis.ParseURL(f.redis)
		if err != nil {
			return nil, "", nil, nil, usageError("--redis: %v", err)
		}
		o.ContextTimeoutEnabled = true // --timeout bounds the network I/O
		return f.redisStore(redis.NewClient(o), "the Redis store")
	case f.redisCluster != "":
		o, err := redis.ParseClusterURL(f.redisCluster)
		if err != nil {
			return nil, "", nil, nil, usageError("--redis-cluster: %v", err)
		}
		o.ContextTimeoutEnabled = true
		return f.redisStore(redis.NewClusterClient(o), "the Redis Cluster store")
	case f.redisSentinel != "":
		o, err := redis.ParseFailoverURL(f.redisSentinel)
		if err != nil {
			return nil, "", nil, nil, usageError("--redis-sentinel: %v", err)
		}
		if o.MasterName == "" {
			return nil, "", nil, nil, usageError("--redis-sentinel: the URL needs master_name=NAME")
		}
		o.ContextTimeoutEnabled = true
		return f.redisStore(redis.NewFailoverClient(o), "the Redis store of master "+o.MasterName)
	}
	switch {
	case f.mysql != "":
		return f.mysqlStore()
	case f.sqlite != "":
		return f.sqliteStore()
	}
	return f.postgresStore(ctx)
}

// postgresStore opens the PostgreSQL store of --postgres and --table.
func (f *connFlags) postgresStore(ctx context.Context) (store.Store, string, func(), *place, error) {
	cfg, err := pgxpool.ParseConfig(f.postgres)
	if err != nil {
		return nil, "", nil, nil, usageError("--postgres: %v", err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg) // connects on first use
	if err != nil {
		return nil, "", nil, nil, failure("--postgres: %v", err)
	}
	st, err := newStore(func() *postgresstore.Store {
		return postgresstore.New(pool, postgresstore.WithTable(f.table), postgresstore.WithSweepInterval(0))
	})
	if err != nil {
		pool.Close()
		return nil, "", nil, nil, err
	}
	return st, "the PostgreSQL store (table " + f.table + ")", func() { _ = st.Close(); pool.Close() }, postgresPlace(pool, f.table), nil
}

// mysqlStore opens the MySQL or MariaDB store of --mysql and --table. The
// DSN must name a database, unless --table does (database.name).
func (f *connFlags) mysqlStore() (store.Store, string, func(), *place, error) {
	cfg, err := mysql.ParseDSN(f.mysql)
	if err != nil {
		return nil, "", nil, nil, usageError("--mysql: %v", err)
	}
	if cfg.DBName == "" && !strings.Contains(f.table, ".") {
		return nil, "", nil, nil, usageError("--mysql: the DSN names no database: end it with /DATABASE, or give --table DATABASE.%s", f.table)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, "", nil, nil, usageError("--mysql: %v", err)
	}
	db := sql.OpenDB(connector) // connects on first use
	db.SetMaxOpenConns(2)
	st, err := newStore(func() *mysqlstore.Store {
		return mysqlstore.New(db, mysqlstore.WithTable(f.table), mysqlstore.WithSweepInterval(0))
	})
	if err != nil {
		_ = db.Close()
		return nil, "", nil, nil, err
	}
	in := ""
	if cfg.DBName != "" && !strings.Contains(f.table, ".") {
		in = " in database " + cfg.DBName
	}
	return st, "the MySQL store (table " + f.table + in + ")", func() { _ = st.Close(); _ = db.Close() }, mysqlPlace(db, f.table, in), nil
}

// sqliteStore opens the SQLite store of --sqlite and --table: the table
// in the main database of the file, which must exist (a mistyped path is
// an error, not a new, empty store). The file is opened as
// sqlitestore.Open opens it, in WAL mode, beside the processes that
// serve it.
func (f *connFlags) sqliteStore() (store.Store, string, func(), *place, error) {
	if strings.Contains(f.table, ".") {
		return nil, "", nil, nil, usageError("--table %s: a SQLite store reached directly is in the main database of the file --sqlite names: give the file of the attached database, and the table's name alone", f.table)
	}
	fi, err := os.Stat(f.sqlite)
	if err != nil {
		return nil, "", nil, nil, failure("--sqlite: %v", err)
	}
	if fi.IsDir() {
		return nil, "", nil, nil, usageError("--sqlite %s: a directory: want the store's database file", f.sqlite)
	}
	db, err := sqlitestore.Open(f.sqlite, sqlitestore.WithMaxConns(2))
	if err != nil {
		return nil, "", nil, nil, failure("--sqlite: %v", err)
	}
	st, err := newStore(func() *sqlitestore.Store {
		return sqlitestore.New(db, sqlitestore.WithTable(f.table), sqlitestore.WithSweepInterval(0))
	})
	if err != nil {
		_ = db.Close()
		return nil, "", nil, nil, err
	}
	in := " in the file " + f.sqlite
	return st, "the SQLite store (table " + f.table + in + ")", func() { _ = st.Close(); _ = db.Close() }, sqlitePlace(db, f.table, in), nil
}

func (f *connFlags) redisStore(rdb redis.UniversalClient, where string) (store.Store, string, func(), *place, error) {
	return redisstore.New(rdb, redisstore.WithPrefix(f.redisPrefix)), where, func() { _ = rdb.Close() }, redisPlace(rdb, f.redisPrefix), nil
}

// newStore returns the store open builds, without its sweeper (a command
// line deletes nothing it was not asked to). A table name that the
// store's WithTable refuses, by a panic of its New, is a usage error, with
// its message.
func newStore[S any](open func() S) (st S, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = usageError("--table: %v", r)
		}
	}()
	return open(), nil
}
