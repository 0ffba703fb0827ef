package idempotency_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"slices"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/integration/internal/killtest/killpoint"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore/mysqltest"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// killBackend is a store the processes share and a place outside them
// where their side effects are recorded, as the kill tests' server binary
// reaches them.
type killBackend struct {
	// store and effect are the binary's flags that name the store and
	// the place of the effects.
	store, effect []string
	// effects counts the side effects recorded for key.
	effects func(ctx context.Context, key string) (int, error)
}

// args are the binary's flags that name the store and the effects.
func (b killBackend) args() []string { return append(slices.Clone(b.store), b.effect...) }

// killBackends returns, by store, the constructor of a fresh backend:
// Redis with the effects in a Redis list on the same server; PostgreSQL
// with the effects in a table of the same database; MySQL with the
// effects in a Redis list; SQLite, a file every process opens in turn,
// with the effects in a table of the same file.
func killBackends() map[string]func(t *testing.T) killBackend {
	return map[string]func(t *testing.T) killBackend{
		"redis": func(t *testing.T) killBackend {
			rs := redistest.StartServer(t)
			return killBackend{
				store:   []string{"-store", "redis", "-store-url", rs.Addr()},
				effect:  []string{"-effect", "redis", "-effect-url", rs.Addr()},
				effects: redisEffects(rs),
			}
		},
		"postgres": func(t *testing.T) killBackend {
			admin := pgtest.Pool(t, 2)
			schema := "k_" + strings.ToLower(rand.Text()[:12])
			records, effects := schema+".records", schema+".effects"
			if _, err := admin.Exec(t.Context(), "CREATE SCHEMA "+schema+"; "+killpoint.EffectsTable(effects)); err != nil {
				t.Fatal(err)
			}
			s := postgresstore.New(admin, postgresstore.WithTable(records), postgresstore.WithSweepInterval(0))
			defer s.Close()
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			url := pgtest.URL(t)
			return killBackend{
				store:  []string{"-store", "postgres", "-store-url", url, "-table", records},
				effect: []string{"-effect", "postgres", "-effect-url", url, "-effect-table", effects},
				effects: func(ctx context.Context, key string) (n int, err error) {
					err = admin.QueryRow(ctx, "SELECT count(*) FROM "+effects+" WHERE key = $1", key).Scan(&n)
					return n, err
				},
			}
		},
		"mysql": func(t *testing.T) killBackend {
			records := "k_" + strings.ToLower(rand.Text()[:12]) + "_records"
			s := mysqlstore.New(mysqltest.DB(t, 2), mysqlstore.WithTable(records), mysqlstore.WithSweepInterval(0))
			defer s.Close()
			if err := s.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			rs := redistest.StartServer(t)
			return killBackend{
				store:   []string{"-store", "mysql", "-store-url", mysqltest.DSN(t), "-table", records},
				effect:  []string{"-effect", "redis", "-effect-url", rs.Addr()},
				effects: redisEffects(rs),
			}
		},
		"sqlite": func(t *testing.T) killBackend {
			path, db := newSQLiteKillFile(t)
			return killBackend{
				store:   []string{"-store", "sqlite", "-store-url", path},
				effect:  []string{"-effect", "sqlite", "-effect-url", path, "-effect-table", sqliteKillEffects},
				effects: sqliteEffects(db),
			}
		},
	}
}

// sqliteKillEffects is the table of the side effects in a SQLite file of
// newSQLiteKillFile.
const sqliteKillEffects = "effects"

// newSQLiteKillFile makes a SQLite database file (newSQLiteStore) with
// the effects' table (sqliteKillEffects) beside the store's, and returns
// its path and a pool on it, closed when t ends. The processes open the
// file in turn, each with its own pool.
func newSQLiteKillFile(t *testing.T) (string, *sql.DB) {
	t.Helper()
	_, db, path := newSQLiteStore(t)
	if _, err := db.ExecContext(t.Context(), killpoint.EffectsTable(sqliteKillEffects)); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// sqliteEffects counts the rows of key in the effects' table of a file of
// newSQLiteKillFile, through db.
func sqliteEffects(db *sql.DB) func(ctx context.Context, key string) (int, error) {
	q := "SELECT count(*) FROM " + sqliteKillEffects + " WHERE key = ?"
	return func(ctx context.Context, key string) (n int, err error) {
		err = db.QueryRowContext(ctx, q, key).Scan(&n)
		return n, err
	}
}

// redisEffects counts the entries of key's effects list on rs.
func redisEffects(rs *redistest.Server) func(ctx context.Context, key string) (int, error) {
	rdb := rs.Client()
	return func(ctx context.Context, key string) (int, error) {
		n, err := rdb.LLen(ctx, killpoint.EffectsList(key)).Result()
		return int(n), err
	}
}
