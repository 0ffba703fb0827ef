package postgresstore_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/postgresstore"
	"github.com/grpc-idempotency/idempotency/store/postgresstore/pgtest"
)

// TestInvalidationsWhateverTheTableSpelling: stores that name one table
// differently ("t" found through the search_path, and "schema.t") purge
// and listen on one channel, so a purge through either reaches the
// subscription of the other. The channel of a table named "schema.t" is
// the one earlier releases used for that spelling.
func TestInvalidationsWhateverTheTableSpelling(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, 2)
	schema := newSchema(t, pool)
	inPublic := "t_" + strings.ToLower(rand.Text()[:12])
	cfg := pgtest.Config(t, 2)
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	onPath := pgtest.PoolFrom(t, cfg)
	for _, tc := range []struct {
		name  string
		a, b  string
		bPool bool // b's pool has schema on its search_path
	}{
		{name: "public", a: inPublic, b: "public." + inPublic},
		{name: "search_path", a: schema + ".records", b: "records", bPool: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := postgresstore.New(pool, postgresstore.WithTable(tc.a), postgresstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = a.Close() })
			if err := a.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			bp := pool
			if tc.bPool {
				bp = onPath
			}
			b := postgresstore.New(bp, postgresstore.WithTable(tc.b), postgresstore.WithSweepInterval(0))
			t.Cleanup(func() { _ = b.Close() })
			qualified := tc.b
			if tc.bPool {
				qualified = tc.a
			}
			sum := sha256.Sum256([]byte(pgx.Identifier(strings.Split(qualified, ".")).Sanitize()))
			for _, st := range []*postgresstore.Store{a, b} {
				if got, err := postgresstore.ChannelOf(t.Context(), st); err != nil || got != "idempotency_purged_"+hex.EncodeToString(sum[:8]) {
					t.Fatalf("channel %q, %v; want the earlier releases' channel of %q", got, err, qualified)
				}
			}
			for _, dir := range []struct {
				name            string
				purger, watcher *postgresstore.Store
			}{{"a to b", a, b}, {"b to a", b, a}} {
				ch, err := dir.watcher.Invalidations(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				key := "k " + dir.name
				completeKey(t, dir.purger, key, []byte("data"))
				if _, err := dir.watcher.Lookup(t.Context(), key); err != nil {
					t.Fatalf("%s: the other spelling does not see the key: %v", dir.name, err)
				}
				if _, err := dir.purger.Purge(t.Context(), key, store.PurgeOptions{}); err != nil {
					t.Fatal(err)
				}
				if inv := receive(t, ch); inv != (store.Invalidation{Key: key}) {
					t.Fatalf("%s: got %+v, want the purge of %q", dir.name, inv, key)
				}
			}
		})
	}
}
