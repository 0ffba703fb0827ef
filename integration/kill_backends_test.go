package idempotency_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/grpc-idempotency/idempotency/integration/internal/killtest/killpoint"
	"github.com/grpc-idempotency/idempotency/internal/test/mysqltest"
	"github.com/grpc-idempotency/idempotency/internal/test/pgtest"
	"github.com/grpc-idempotency/idempotency/internal/test/redistest"
	"github.com/grpc-idempotency/idempotency/store/mysqlstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
)

// killBackend is a shared store and a place outside the processes where
// their side effects are recorded, as the kill tests' server binary
// reaches them.
type killBackend struct {
	// args are the binary's flags that name the store and the effects.
	args []string
	// effects counts the side effects recorded for key.
	effects func(ctx context.Context, key string) (int, error)
}

// killBackends returns, by store, the constructor of a fresh backend:
// Redis with the effects in a Redis list on the same server; PostgreSQL
// with the effects in a table of the same database; MySQL with the
// effects in a Redis list.
func killBackends() map[string]func(t *testing.T) killBackend {
	return map[string]func(t *testing.T) killBackend{
		"redis": func(t *testing.T) killBackend {
			rs := redistest.StartServer(t)
			return killBackend{
				args:    []string{"-store", "redis", "-store-url", rs.Addr(), "-effect", "redis", "-effect-url", rs.Addr()},
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
				args: []string{"-store", "postgres", "-store-url", url, "-table", records, "-effect", "postgres", "-effect-url", url, "-effect-table", effects},
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
				args:    []string{"-store", "mysql", "-store-url", mysqltest.DSN(t), "-table", records, "-effect", "redis", "-effect-url", rs.Addr()},
				effects: redisEffects(rs),
			}
		},
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
