package redistest_test

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestServerStopRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rdb := srv.Client()
	ctx := t.Context()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	srv.Stop()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Fatal("PING on a stopped server succeeded")
	}
	addr := srv.Addr()
	srv.Restart()
	if srv.Addr() != addr {
		t.Fatalf("Addr after Restart = %s, want %s", srv.Addr(), addr)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart with the same client: %v", err)
	}
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart = %v, want redis.Nil (no persistence)", err)
	}
}

func TestServerPersistenceOffAndArgs(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, "--maxmemory-policy", "noeviction")
	rdb := srv.Client()
	for param, want := range map[string]string{
		"save":             "",
		"appendonly":       "no",
		"bind":             "127.0.0.1",
		"maxmemory-policy": "noeviction",
	} {
		got, err := rdb.ConfigGet(t.Context(), param).Result()
		if err != nil {
			t.Fatalf("CONFIG GET %s: %v", param, err)
		}
		if got[param] != want {
			t.Errorf("CONFIG GET %s = %q, want %q", param, got[param], want)
		}
	}
}

func TestServersGetDistinctPorts(t *testing.T) {
	t.Parallel()
	a, b := redistest.StartServer(t), redistest.StartServer(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers on %s", a.Addr())
	}
	if a.Addr() == "127.0.0.1:6379" || b.Addr() == "127.0.0.1:6379" {
		t.Fatal("a test server took the shared port 6379")
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	if got := len(c.Addrs()); got != redistest.ClusterSize {
		t.Fatalf("len(Addrs) = %d, want %d", got, redistest.ClusterSize)
	}
	rdb := c.Client()
	ctx := t.Context()
	masters := map[string]bool{}
	for i := range 30 {
		key := fmt.Sprintf("key-%d", i)
		if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		node, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("MasterForKey: %v", err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) != redistest.ClusterSize {
		t.Fatalf("30 keys landed on %d masters, want %d", len(masters), redistest.ClusterSize)
	}
	for _, addr := range c.Addrs() {
		if _, port, _ := net.SplitHostPort(addr); port == "6379" {
			t.Fatal("a cluster node took the shared port 6379")
		}
	}
}

func TestSentinel(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t)
	rdb := s.Client()
	ctx := t.Context()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	got, err := s.Master.Client().Get(ctx, "k").Result()
	if err != nil || got != "v" {
		t.Fatalf("GET on the master = %q, %v; want v", got, err)
	}
}

func TestRoundTrips(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rdb := srv.Client()
	ctx := t.Context()
	if err := rdb.Ping(ctx).Err(); err != nil { // warm up the connection
		t.Fatal(err)
	}
	var rt redistest.RoundTrips
	rdb.AddHook(&rt)
	rdb.Set(ctx, "a", 1, 0)
	rdb.Get(ctx, "a")
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, "a")
		p.Incr(ctx, "a")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"set", "get", "pipeline(incr,incr)"}
	if got := rt.Commands(); rt.Count() != 3 || !slices.Equal(got, want) {
		t.Fatalf("Count = %d, Commands = %q; want 3, %q", rt.Count(), got, want)
	}
	rt.Reset()
	if rt.Count() != 0 || len(rt.Commands()) != 0 {
		t.Fatalf("after Reset: Count = %d, Commands = %q", rt.Count(), rt.Commands())
	}
}

func TestRoundTripsHandshakeCountedApart(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t).Client()
	var rt redistest.RoundTrips
	rdb.AddHook(&rt) // before the first connection is dialled
	if err := rdb.Set(t.Context(), "a", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if rt.Count() != 1 || rt.Handshakes() == 0 {
		t.Fatalf("Count = %d (%q), Handshakes = %d; want 1 and at least 1", rt.Count(), rt.Commands(), rt.Handshakes())
	}
}

func TestRoundTripsCluster(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartCluster(t).Client()
	ctx := t.Context()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var rt redistest.RoundTrips
	rdb.AddHook(&rt)
	for i := range 10 {
		if err := rdb.Set(ctx, fmt.Sprint(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if rt.Count() != 10 {
		t.Fatalf("Count = %d after 10 SETs, want 10: %q", rt.Count(), rt.Commands())
	}
}

func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinelWith(t, redistest.SentinelConfig{Replicas: 2, DownAfter: time.Second})
	ctx := t.Context()
	rdb := s.Client()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	if err := rdb.Wait(ctx, 2, time.Second).Err(); err != nil {
		t.Fatalf("WAIT 2: %v", err)
	}
	old, err := s.MasterAddr(ctx)
	if err != nil || old != s.Master.Addr() {
		t.Fatalf("MasterAddr = %s, %v; want %s", old, err, s.Master.Addr())
	}
	s.Master.Stop()
	promoted := s.WaitFailover(ctx, old)
	if got, err := promoted.Client().Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET on the promoted replica = %q, %v; want v", got, err)
	}
	if err := rdb.Set(ctx, "k2", "v2", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client after the failover: %v", err)
	}
}

func TestClusterMigrateSlot(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	rdb := c.Client()
	ctx := t.Context()
	slot := int(rdb.ClusterKeySlot(ctx, "{tag}").Val())
	for i := range 120 { // more than one MIGRATE batch
		if err := rdb.Set(ctx, fmt.Sprintf("{tag}%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := (from + 1) % redistest.ClusterSize
	if got, err := c.MigrateSlot(ctx, slot, to, redistest.MigrateOptions{}); err != nil || got != from {
		t.Fatalf("MigrateSlot = %d, %v; want %d", got, err, from)
	}
	if owner, err := c.SlotOwner(ctx, slot); err != nil || owner != to {
		t.Fatalf("SlotOwner after the migration = %d, %v; want %d", owner, err, to)
	}
	if n := c.NodeClient(from).DBSize(ctx).Val(); n != 0 {
		t.Fatalf("the source still holds %d keys", n)
	}
	for i := range 120 {
		if got, err := rdb.Get(ctx, fmt.Sprintf("{tag}%d", i)).Int(); err != nil || got != i {
			t.Fatalf("GET {tag}%d after the migration = %d, %v", i, got, err)
		}
	}
}

func TestClusterNodeStopRestart(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	opts := c.Options()
	opts.MaxRetries = -1
	rdb := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	slot := int(rdb.ClusterKeySlot(ctx, "k").Val())
	owner, err := c.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c.StopNode(owner)
	if err := rdb.Get(ctx, "k").Err(); err == nil {
		t.Fatal("GET of a key on a stopped node succeeded")
	}
	c.RestartNode(owner)
	if err := rdb.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after the restart = %v, want redis.Nil (no persistence)", err)
	}
	if err := rdb.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatalf("SET after the restart: %v", err)
	}
	if got, err := c.SlotOwner(ctx, slot); err != nil || got != owner {
		t.Fatalf("the restarted node owns slot %d: %d, %v; want %d", slot, got, err, owner)
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	ctx := t.Context()
	rdb := c.Client()
	slot := int(rdb.ClusterKeySlot(ctx, "k").Val())
	owner, err := c.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	other := (owner + 1) % redistest.ClusterSize
	var r redistest.Redirects
	wrong := c.NodeClient(other)
	if err := r.Attach(ctx, wrong); err != nil {
		t.Fatal(err)
	}
	if err := wrong.Get(ctx, "k").Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Fatalf("GET on a node that does not own the key = %v, want MOVED", err)
	}
	p := wrong.Pipeline()
	p.Get(ctx, "k")
	p.Set(ctx, "k", "v", 0)
	_, _ = p.Exec(ctx)
	// ASK: the owner migrates the slot and does not hold the key.
	owning := c.NodeClient(owner)
	if err := r.Attach(ctx, owning); err != nil {
		t.Fatal(err)
	}
	id := c.NodeClient(other).ClusterMyID(ctx).Val()
	if err := c.NodeClient(other).Do(ctx, "cluster", "setslot", slot, "importing", owning.ClusterMyID(ctx).Val()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := owning.Do(ctx, "cluster", "setslot", slot, "migrating", id).Err(); err != nil {
		t.Fatal(err)
	}
	if err := owning.Get(ctx, "k").Err(); err == nil || !strings.HasPrefix(err.Error(), "ASK ") {
		t.Fatalf("GET of a missing key in a migrating slot = %v, want ASK", err)
	}
	if r.Count("MOVED", "get") != 2 || r.Count("MOVED", "set") != 1 || r.Count("ASK", "") != 1 || r.Count("MOVED", "") != 3 {
		t.Fatalf("counts %v; want MOVED get=2 set=1 and ASK get=1", &r)
	}
}
