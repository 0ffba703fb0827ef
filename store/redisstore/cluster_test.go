package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// TestClusterKeysSpread checks that keys land in different slots on
// different masters, and that every step works wherever its key lives.
func TestClusterKeysSpread(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartCluster(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	masters, slots := map[string]bool{}, map[int64]bool{}
	for i := range 30 {
		key := fmt.Sprintf("%s/%d", newKey(t), i)
		rkey := redisstore.DefaultPrefix + key
		node, err := rdb.MasterForKey(ctx, rkey)
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
		slot, err := rdb.ClusterKeySlot(ctx, rkey).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true

		fingerprint := fp()
		c, err := st.Claim(ctx, key, fingerprint, longTTL, store.ClaimOptions{})
		if err != nil || !c.Won() {
			t.Fatalf("Claim(%q) = %+v, %v", key, c, err)
		}
		if err := st.Extend(ctx, key, c.Token, longTTL); err != nil {
			t.Fatalf("Extend(%q): %v", key, err)
		}
		if i%2 == 0 {
			if err := st.Release(ctx, key, c.Token); err != nil {
				t.Fatalf("Release(%q): %v", key, err)
			}
			continue
		}
		if err := st.Complete(ctx, key, c.Token, []byte(key), longTTL); err != nil {
			t.Fatalf("Complete(%q): %v", key, err)
		}
		c, err = st.Claim(ctx, key, fp(), longTTL, store.ClaimOptions{})
		if err != nil || c.Won() || string(c.Existing.Data) != key || string(c.Existing.Fingerprint) != string(fingerprint) {
			t.Fatalf("Claim(%q) of a completed key = %+v, %v", key, c, err)
		}
	}
	if len(masters) != redistest.ClusterSize || len(slots) < 20 {
		t.Fatalf("30 keys used %d masters and %d slots, want %d masters and many slots", len(masters), len(slots), redistest.ClusterSize)
	}
}
