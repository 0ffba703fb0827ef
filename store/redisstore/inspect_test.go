package redisstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

// completeKey claims and completes key in st with data.
func completeKey(t *testing.T, st *redisstore.Store, key string, data []byte) {
	t.Helper()
	c, err := st.Claim(t.Context(), key, fp(), longTTL, store.ClaimOptions{})
	if err != nil || !c.Won() {
		t.Fatalf("Claim(%q) = %+v, %v", key, c, err)
	}
	if err := st.Complete(t.Context(), key, c.Token, data, longTTL); err != nil {
		t.Fatal(err)
	}
}

// TestInspectRoundTrips: Lookup, Purge with a token, a page of List and
// Stats each take one round trip once the scripts are loaded (Stats and
// List one per master they scan: one here); Purge without a token two,
// the Lookup that finds the token to fence the purge with, and the purge.
func TestInspectRoundTrips(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	if err := st.LoadScripts(ctx); err != nil {
		t.Fatal(err)
	}
	key, fenced := newKey(t), newKey(t)
	completeKey(t, st, key, []byte("data"))
	completeKey(t, st, fenced, []byte("data"))
	info, err := st.Lookup(ctx, fenced)
	if err != nil {
		t.Fatal(err)
	}
	var rt redistest.RoundTrips
	if err := rt.Attach(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		op   string
		want int
		run  func() error
	}{
		{"Lookup", 1, func() error { _, err := st.Lookup(ctx, key); return err }},
		{"List", 1, func() error { _, err := st.List(ctx, store.ListOptions{}); return err }},
		{"Stats", 1, func() error { _, err := st.Stats(ctx); return err }},
		{"PurgeWithToken", 1, func() error { _, err := st.Purge(ctx, fenced, store.PurgeOptions{Token: info.Token}); return err }},
		{"Purge", 2, func() error { _, err := st.Purge(ctx, key, store.PurgeOptions{}); return err }},
	} {
		rt.Reset()
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.op, err)
		}
		if rt.Count() != step.want {
			t.Fatalf("%s took %d round trips %q, want %d", step.op, rt.Count(), rt.Commands(), step.want)
		}
	}
}

// TestListClusterEveryMaster walks a real three-master Cluster with small
// pages: every key is listed, from every master, and the cursor names
// each master in turn.
func TestListClusterEveryMaster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t)
	ctx := t.Context()
	st := redisstore.New(cluster.Client())
	const n = 300
	for i := range n {
		completeKey(t, st, fmt.Sprint("k", i), []byte("data"))
	}
	for i := range redistest.ClusterSize {
		if size := cluster.NodeClient(i).DBSize(ctx).Val(); size == 0 {
			t.Fatalf("master %d holds no key: the case proves nothing", i)
		}
	}
	seen := map[string]bool{}
	masters := map[string]bool{}
	var page store.Page
	for pages := 0; pages == 0 || page.Next != ""; pages++ {
		if pages > 10*n {
			t.Fatal("the walk does not end")
		}
		var err error
		if page, err = st.List(ctx, store.ListOptions{Cursor: page.Next, Limit: 10}); err != nil {
			t.Fatal(err)
		}
		for _, info := range page.Entries {
			seen[info.Key] = true
		}
		if page.Next != "" {
			addr, err := redisstore.CursorMaster(page.Next)
			if err != nil {
				t.Fatal(err)
			}
			masters[addr] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("the walk listed %d keys, want %d", len(seen), n)
	}
	if len(masters) != redistest.ClusterSize {
		t.Fatalf("the cursors named masters %v, want all %d", masters, redistest.ClusterSize)
	}
}

// TestInvalidationsAcrossClients: a purge made through one client reaches
// a subscriber of a store on another client (two servers over one Redis),
// on a single node and on a Cluster, where PUBLISH reaches every node.
func TestInvalidationsAcrossClients(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]func(t *testing.T) (a, b redis.UniversalClient){
		"Standalone": func(t *testing.T) (a, b redis.UniversalClient) {
			s := redistest.StartServer(t)
			return s.Client(), s.Client()
		},
		"Cluster": func(t *testing.T) (a, b redis.UniversalClient) {
			c := redistest.StartCluster(t)
			return c.Client(), c.Client()
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rdbA, rdbB := start(t)
			a, b := redisstore.New(rdbA), redisstore.New(rdbB)
			ch, err := b.Invalidations(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for i := range 20 { // keys on every node of a Cluster
				key := fmt.Sprint(newKey(t), i)
				completeKey(t, a, key, []byte("data"))
				if _, err := a.Purge(t.Context(), key, store.PurgeOptions{}); err != nil {
					t.Fatal(err)
				}
				if inv := receive(t, ch); inv != (store.Invalidation{Key: key}) {
					t.Fatalf("got %+v, want the purge of %q", inv, key)
				}
			}
		})
	}
}

// receive returns the next invalidation of ch, failing after 10 s.
func receive(t *testing.T, ch <-chan store.Invalidation) store.Invalidation {
	t.Helper()
	select {
	case inv, ok := <-ch:
		if !ok {
			t.Fatal("the channel closed")
		}
		return inv
	case <-time.After(10 * time.Second):
		t.Fatal("no invalidation within 10s")
	}
	return store.Invalidation{}
}

// TestInvalidationsAfterReconnect: when the subscription's connection is
// cut, purges published meanwhile are lost; once go-redis has subscribed
// again, the subscriber is told (All), and purges arrive again.
func TestInvalidationsAfterReconnect(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	ch, err := st.Invalidations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Result(); err != nil || n != 1 {
		t.Fatalf("CLIENT KILL TYPE pubsub = %d, %v; want 1 connection killed", n, err)
	}
	if inv := receive(t, ch); !inv.All {
		t.Fatalf("got %+v after the connection was cut, want All", inv)
	}
	key := newKey(t)
	completeKey(t, st, key, []byte("data"))
	if _, err := st.Purge(ctx, key, store.PurgeOptions{}); err != nil {
		t.Fatal(err)
	}
	if inv := receive(t, ch); inv.Key != key {
		t.Fatalf("got %+v, want the purge of %q", inv, key)
	}
}

// TestInspectLayout1: an entry of the earlier layout, a hash, is looked
// up, listed and purged as any other; its claim time is unknown.
func TestInspectLayout1(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	key, fingerprint := newKey(t), fp()
	writeLayout1(t, rdb, redisstore.DefaultPrefix+key, "c", "layout1-owner-token-22", fingerprint, []byte("stored"))
	info, err := st.Lookup(ctx, key)
	if err != nil || info.State != store.StateCompleted || string(info.Data) != "stored" ||
		!bytes.Equal(info.Fingerprint, fingerprint) || info.Token != "layout1-owner-token-22" || !info.Claimed.IsZero() {
		t.Fatalf("Lookup = %+v, %v", info, err)
	}
	page, err := st.List(ctx, store.ListOptions{MinAge: time.Hour})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Key != key || page.Entries[0].Size != info.Size || page.Entries[0].Data != nil {
		t.Fatalf("List = %+v, %v; want the entry, kept whatever its age, as Lookup sizes it (%d bytes)", page, err, info.Size)
	}
	if _, err := st.Purge(ctx, key, store.PurgeOptions{InFlight: true}); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("Purge with InFlight: %v, want store.ErrChanged", err)
	}
	if _, err := st.Purge(ctx, key, store.PurgeOptions{Token: info.Token}); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, redisstore.DefaultPrefix+key).Val(); n != 0 {
		t.Fatal("the hash is still there")
	}
}

// TestInspectCorrupt: a value under the prefix that is not an entry is
// reported corrupt by Lookup and Purge, which leaves it, and left out of
// listings and counts.
func TestInspectCorrupt(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	for name, write := range map[string]func(rkey string) error{
		"string": func(rkey string) error { return rdb.Set(ctx, rkey, "not an entry", 0).Err() },
		"list":   func(rkey string) error { return rdb.RPush(ctx, rkey, "x").Err() },
		"state":  func(rkey string) error { return rdb.Set(ctx, rkey, "\x02z\x00\x00\x00", 0).Err() },
	} {
		key := newKey(t) + name
		if err := write(redisstore.DefaultPrefix + key); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Lookup(ctx, key); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("%s: Lookup: %v, want store.ErrCorrupt", name, err)
		}
		if _, err := st.Purge(ctx, key, store.PurgeOptions{InFlight: true}); !errors.Is(err, store.ErrCorrupt) {
			t.Fatalf("%s: Purge: %v, want store.ErrCorrupt", name, err)
		}
		if n := rdb.Exists(ctx, redisstore.DefaultPrefix+key).Val(); n != 1 {
			t.Fatalf("%s: Purge deleted the value", name)
		}
	}
	page, err := st.List(ctx, store.ListOptions{})
	if err != nil || len(page.Entries) != 0 || page.Next != "" {
		t.Fatalf("List = %+v, %v; want nothing", page, err)
	}
	if s, err := st.Stats(ctx); err != nil || s != (store.Stats{}) {
		t.Fatalf("Stats = %+v, %v; want nothing counted", s, err)
	}
}

// TestStats: a Redis with fewer keys than the sample is counted exactly,
// as Lookup sizes the entries and whatever else it holds; one with more
// is estimated from the sample, and the estimate is close.
func TestStats(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	if err := rdb.Set(ctx, "not the store's", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var want store.Stats
	for i := range 3 {
		key := fmt.Sprint("k", i)
		c, err := st.Claim(ctx, key, fp(), longTTL, store.ClaimOptions{})
		if err != nil {
			t.Fatal(err)
		}
		count := &want.InFlight
		if i > 0 {
			count = &want.Completed
			if err := st.Complete(ctx, key, c.Token, bytes.Repeat([]byte("d"), 100*i), longTTL); err != nil {
				t.Fatal(err)
			}
		}
		info, err := st.Lookup(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		count.Entries++
		count.Bytes += info.Size
	}
	if got, err := st.Stats(ctx); err != nil || got != want {
		t.Fatalf("Stats = %+v, %v; want %+v", got, err, want)
	}

	// 20,000 keys: 5,000 in flight, 5,000 completed, 10,000 of others.
	p := rdb.Pipeline()
	inFlight := redisstore.EncodeInFlight(store.NewToken(), fp())
	completed := append(append([]byte{2, 'c'}, inFlight[2:]...), "data"...)
	for i := range 10_000 {
		p.Set(ctx, fmt.Sprint("other:", i), "x", 0)
		v := inFlight
		if i%2 == 1 {
			v = completed
		}
		p.Set(ctx, fmt.Sprint(redisstore.DefaultPrefix, "bulk", i), v, time.Hour)
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := st.Stats(ctx)
	if err != nil || !got.Estimated {
		t.Fatalf("Stats = %+v, %v; want an estimate", got, err)
	}
	// The sample's standard error is 1.4% of the keys (280 entries): 5 of
	// them (1,400 entries), not to fail by chance.
	for name, c := range map[string]store.Count{"in flight": got.InFlight, "completed": got.Completed} {
		if c.Entries < 5000-1400 || c.Entries > 5000+1400 {
			t.Fatalf("%s: %d entries estimated, want about 5,000 (Stats %+v)", name, c.Entries, got)
		}
	}
}

// TestPurgeWhileFull: Purge runs on a Redis at maxmemory, where it frees
// memory, as the steps of a granted claim do.
func TestPurgeWhileFull(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	rdb := srv.Client()
	ctx := t.Context()
	st := redisstore.New(rdb)
	key := newKey(t)
	completeKey(t, st, key, []byte("data"))
	n := srv.FillMemory(ctx, "filler:")
	defer srv.FreeMemory(ctx, "filler:", n)
	if _, err := st.Claim(ctx, newKey(t)+"new", fp(), longTTL, store.ClaimOptions{}); !errors.Is(err, store.ErrFull) {
		t.Fatalf("Claim of a new key: %v, want store.ErrFull: Redis is not full", err)
	}
	if _, err := st.Lookup(ctx, key); err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	if _, err := st.Purge(ctx, key, store.PurgeOptions{}); err != nil {
		t.Fatalf("Purge: %v", err)
	}
}

// The benchmarks' tokens of another time are tokens of store.NewToken's
// shape, which TokenTime reads.
func TestTokenAt(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(time.Now().Add(-10 * time.Minute).UnixMilli())
	if got, ok := store.TokenTime(tokenAt(at)); !ok || !got.Equal(at) {
		t.Fatalf("TokenTime(tokenAt(%v)) = %v, %v", at, got, ok)
	}
}
