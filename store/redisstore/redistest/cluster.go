package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterSize is the number of masters [StartCluster] starts.
const ClusterSize = 3

// clusterTimeout bounds cluster creation and the wait for a healthy cluster.
const clusterTimeout = 30 * time.Second

// Cluster is a Redis Cluster of [ClusterSize] masters and no replicas,
// started by [StartCluster].
type Cluster struct {
	tb    testing.TB
	nodes []*process

	mu     sync.Mutex
	admins []*redis.Client // per node, for the helpers; see admin
}

// StartCluster starts [ClusterSize] cluster-enabled redis-server processes
// on free loopback ports (each with its bus port, port+10000, free too),
// joins them into one cluster with redis-cli --cluster create, waits until
// every node reports cluster_state:ok with all 16384 slots assigned, and
// stops them in tb.Cleanup.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	bin, cli := Require(tb)
	c := &Cluster{tb: tb}
	for range ClusterSize {
		c.nodes = append(c.nodes, startProcess(tb, bin, true, func(dir string, port int) []string {
			return append(baseArgs(dir, port),
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "5000",
			)
		}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitHealthy(ctx); err != nil {
		tb.Fatalf("redistest: cluster: %v", err)
	}
	return c
}

// waitHealthy waits until every node sees a complete, healthy cluster.
func (c *Cluster) waitHealthy(ctx context.Context) error {
	want := []string{
		"cluster_state:ok",
		"cluster_slots_assigned:16384",
		"cluster_slots_ok:16384",
		fmt.Sprintf("cluster_known_nodes:%d", ClusterSize),
		fmt.Sprintf("cluster_size:%d", ClusterSize),
	}
	for _, n := range c.nodes {
		for {
			info, err := bulkCommand(n.addr(), "CLUSTER INFO")
			if err == nil && containsAll(info, want) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %s not healthy: %v\n%s", n.addr(), err, info)
			case <-time.After(pollInterval):
			}
		}
	}
	return nil
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub+"\r\n") {
			return false
		}
	}
	return true
}

// Addrs returns the addresses of the cluster's masters.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr()
	}
	return addrs
}

// Options returns fresh cluster client options, to adjust before passing
// them to redis.NewClusterClient; the caller closes such a client.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs()}
}

// Client returns a new cluster client, closed in tb.Cleanup before the
// cluster stops. Each call returns a distinct client.
func (c *Cluster) Client() *redis.ClusterClient {
	rdb := redis.NewClusterClient(c.Options())
	c.tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// StopNode kills the i-th master (0 to [ClusterSize]-1, in the order of
// [Cluster.Addrs]) and waits until it has exited. Clients then get errors
// for the keys of its slots; the other nodes mark it failing after the
// cluster node timeout (5 s).
func (c *Cluster) StopNode(i int) {
	c.tb.Helper()
	c.nodes[i].stop()
}

// RestartNode starts the i-th master again on its port, stopping it first
// if it runs, and waits until every node sees a healthy cluster again. It
// comes back with the node ID and slots it had (the cluster keeps its own
// configuration file) and no data: persistence is off.
func (c *Cluster) RestartNode(i int) {
	c.tb.Helper()
	c.nodes[i].restart()
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	if err := c.waitHealthy(ctx); err != nil {
		c.tb.Fatalf("redistest: cluster after restarting node %d: %v", i, err)
	}
}

// NodeClient returns a new client of the i-th master alone (not a cluster
// client), closed in tb.Cleanup before the cluster stops.
func (c *Cluster) NodeClient(i int) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: c.nodes[i].addr()})
	c.tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
