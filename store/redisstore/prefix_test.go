package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestListNestedPrefixes: stores whose prefixes extend one another, or
// that a prefix's glob characters would match, share one Redis (a single
// node and a Cluster, whose masters List and Stats scan in turn), and each
// lists and counts its own entries only, exactly.
func TestListNestedPrefixes(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]func(t *testing.T) redis.UniversalClient{
		"Standalone": func(t *testing.T) redis.UniversalClient { return redistest.StartServer(t).Client() },
		"Cluster":    func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t).Client() },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdb := start(t)
			const p = "idem*[x]:"
			prefixes := []string{p, p + "orders:", p + "orders:eu:", "idemZx:", "idem*[x]:a:"}
			keys := map[string]map[string]bool{}
			for i, prefix := range prefixes {
				st := redisstore.New(rdb, redisstore.WithPrefix(prefix))
				keys[prefix] = map[string]bool{}
				for j := range 10 + i { // on every master of a Cluster
					key := fmt.Sprint(newKey(t), "-", j)
					completeKey(t, st, key, []byte("data"))
					keys[prefix][key] = true
				}
			}
			for _, prefix := range prefixes {
				st := redisstore.New(rdb, redisstore.WithPrefix(prefix))
				seen := map[string]bool{}
				var page store.Page
				for pages := 0; pages == 0 || page.Next != ""; pages++ {
					if pages > 1000 {
						t.Fatalf("prefix %q: the walk does not end", prefix)
					}
					var err error
					if page, err = st.List(t.Context(), store.ListOptions{Cursor: page.Next, Limit: 5}); err != nil {
						t.Fatal(err)
					}
					for _, info := range page.Entries {
						if !keys[prefix][info.Key] {
							t.Fatalf("prefix %q listed %q, another store's entry", prefix, info.Key)
						}
						seen[info.Key] = true
					}
				}
				if len(seen) != len(keys[prefix]) {
					t.Fatalf("prefix %q listed %d entries, want %d", prefix, len(seen), len(keys[prefix]))
				}
				s, err := st.Stats(t.Context())
				if err != nil || s.Estimated || s.Completed.Entries != int64(len(keys[prefix])) || s.InFlight.Entries != 0 {
					t.Fatalf("prefix %q: Stats = %+v, %v; want %d completed entries, counted exactly", prefix, s, err, len(keys[prefix]))
				}
			}
		})
	}
}
