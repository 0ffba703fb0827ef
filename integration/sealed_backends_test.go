package idempotency_test

import (
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/migratestore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// sealedBackend is a store of the sealed-record tests, with a read of what
// its backend holds for an entry that goes around the store's own code.
type sealedBackend struct {
	store store.Store
	// raw returns the bytes the backends hold for storeKey, read directly:
	// the Redis value (GET of the prefixed key), the row's fingerprint and
	// data columns; none for the memory store, which has no backend. It
	// fails the test when a backend holds nothing under the key.
	raw func(t *testing.T, storeKey string) [][]byte
}

// sealedBackends returns a constructor per store: memory, Redis (one
// node, and a Cluster), PostgreSQL and MySQL on a table of their own, and
// migratestore moving from Redis to PostgreSQL. networked leaves the
// memory store out.
func sealedBackends(networked bool) map[string]func(t *testing.T) sealedBackend {
	backends := map[string]func(t *testing.T) sealedBackend{
		"redis": func(t *testing.T) sealedBackend {
			rdb := redistest.StartServer(t).Client()
			return sealedBackend{store: redisstore.New(rdb), raw: redisRaw(rdb, redisstore.DefaultPrefix)}
		},
		"redis-cluster": func(t *testing.T) sealedBackend {
			rdb := redistest.StartCluster(t).Client()
			return sealedBackend{store: redisstore.New(rdb), raw: redisRaw(rdb, redisstore.DefaultPrefix)}
		},
		"postgres": func(t *testing.T) sealedBackend {
			l := newPGLedger(t)
			s := postgresstore.New(l.admin, postgresstore.WithTable(l.records()), postgresstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = s.Close() })
			return sealedBackend{store: s, raw: pgRaw(l.admin, l.records())}
		},
		"mysql": func(t *testing.T) sealedBackend {
			l := newMyLedger(t)
			return sealedBackend{store: l.store(t, 8), raw: myRaw(l.admin, l.records())}
		},
		"migrate-redis-to-postgres": func(t *testing.T) sealedBackend {
			rdb := redistest.StartServer(t).Client()
			l := newPGLedger(t)
			to := postgresstore.New(l.admin, postgresstore.WithTable(l.records()), postgresstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = to.Close() })
			fromRaw, toRaw := redisRaw(rdb, "old:"), pgRaw(l.admin, l.records())
			return sealedBackend{
				store: migratestore.New(redisstore.New(rdb, redisstore.WithPrefix("old:")), to),
				raw: func(t *testing.T, key string) [][]byte {
					return append(fromRaw(t, key), toRaw(t, key)...)
				},
			}
		},
	}
	if !networked {
		backends["memory"] = func(t *testing.T) sealedBackend {
			return sealedBackend{store: testkit.NewMemoryStore(t), raw: func(*testing.T, string) [][]byte { return nil }}
		}
	}
	return backends
}

// redisRaw reads the value of a Redis store's entry: GET of its key
// (prefix and store key).
func redisRaw(rdb redis.UniversalClient, prefix string) func(t *testing.T, key string) [][]byte {
	return func(t *testing.T, key string) [][]byte {
		t.Helper()
		v, err := rdb.Get(t.Context(), prefix+key).Bytes()
		if err != nil {
			t.Fatalf("GET %s%s: %v", prefix, key, err)
		}
		return [][]byte{v}
	}
}

// pgRaw reads the fingerprint and data columns of a PostgreSQL store's
// row (store/postgresstore/schema.sql).
func pgRaw(db *pgxpool.Pool, table string) func(t *testing.T, key string) [][]byte {
	return func(t *testing.T, key string) [][]byte {
		t.Helper()
		var fp, data []byte
		if err := db.QueryRow(t.Context(), "SELECT fingerprint, data FROM "+table+" WHERE key = $1", []byte(key)).Scan(&fp, &data); err != nil {
			t.Fatalf("SELECT from %s: %v", table, err)
		}
		return [][]byte{fp, data}
	}
}

// myRaw reads the fingerprint and data columns of a MySQL store's row
// (store/mysqlstore/schema.sql).
func myRaw(db *sql.DB, table string) func(t *testing.T, key string) [][]byte {
	return func(t *testing.T, key string) [][]byte {
		t.Helper()
		var fp, data []byte
		if err := db.QueryRowContext(t.Context(), "SELECT fingerprint, data FROM "+table+" WHERE `key` = ?", []byte(key)).Scan(&fp, &data); err != nil {
			t.Fatalf("SELECT from %s: %v", table, err)
		}
		return [][]byte{fp, data}
	}
}
