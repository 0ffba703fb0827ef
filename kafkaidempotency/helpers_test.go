package kafkaidempotency_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/grpc-idempotency/idempotency/internal/test/testkit"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
)

const (
	topic = "orders"
	group = "shipper"
)

// cluster is franz-go's in-process Kafka cluster (kfake, which speaks the
// Kafka protocol on loopback ports), started for one test with the topic
// orders of the given partitions. Group sessions may be as short as 100 ms,
// so that a dead member leaves its group quickly.
type cluster struct {
	t     *testing.T
	c     *kfake.Cluster
	seeds []string
	prod  *kgo.Client
}

func startCluster(t *testing.T, partitions int32) *cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	k := &cluster{t: t, c: c, seeds: c.ListenAddrs()}
	k.prod, err = kgo.NewClient(kgo.SeedBrokers(k.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.prod.Close)
	return k
}

// produce writes a record of value to partition p, with headers (pairs of
// key and value), and waits for the cluster to store it.
func (k *cluster) produce(p int32, value string, headers ...string) *kgo.Record {
	k.t.Helper()
	rec := &kgo.Record{Topic: topic, Partition: p, Value: []byte(value)}
	for i := 0; i+1 < len(headers); i += 2 {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	if err := k.prod.ProduceSync(k.t.Context(), rec).FirstErr(); err != nil {
		k.t.Fatal(err)
	}
	return rec
}

// committed returns the group's committed offset of partition p, or -1.
func (k *cluster) committed(g string, p int32) int64 {
	info := k.c.GroupInfo(g)
	if info == nil {
		return -1
	}
	c, ok := info.Commits[topic][p]
	if !ok {
		return -1
	}
	return c.Offset
}

// waitCommitted waits until the group's committed offset of partition p is
// at least want, and returns it.
func (k *cluster) waitCommitted(g string, p int32, want int64) int64 {
	k.t.Helper()
	deadline := time.Now().Add(testkit.ConsumerWait)
	for {
		if got := k.committed(g, p); got >= want {
			return got
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("group %s: partition %d committed %d after %v, want %d", g, p, k.committed(g, p), testkit.ConsumerWait, want)
		}
		time.Sleep(10 * time.Millisecond) // polls the cluster's state: kfake has no commit hook
	}
}

// clientOpts are a member's client options: the cluster, the group, the
// topic, short sessions and fast commits so that tests see them soon.
func (k *cluster) clientOpts(g string, more ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(k.seeds...), kgo.ConsumerGroup(g), kgo.ConsumeTopics(topic),
		kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.AutoCommitInterval(100 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond),
	}, more...)
}

// run runs p as a member of group g until the end of the test (or until
// the returned stop is called), and waits for Run to return at cleanup.
func (k *cluster) run(p *kafkaidempotency.Processor, g string, more ...kgo.Opt) (stop func()) {
	k.t.Helper()
	return testkit.RunInBackground(k.t, func(ctx context.Context) error {
		err := p.Run(ctx, k.clientOpts(g, more...)...)
		if ctx.Err() == nil {
			k.t.Errorf("Run returned before it was stopped: %v", err)
		}
		return err
	}).Stop
}

// newResults returns a recorder of the Results of the processors given
// kafkaidempotency.WithResults(res.Add).
func newResults() testkit.Results[kafkaidempotency.Result] {
	return testkit.NewResults[kafkaidempotency.Result]()
}

// value returns the Result's record value: the tests' record id.
func value(r kafkaidempotency.Result) string { return string(r.Record.Value) }

// network is a member's network: kgo dials through it, and cut closes
// every connection and refuses new ones, as the network of a process that
// died would.
type network struct {
	mu    sync.Mutex
	conns []net.Conn
	down  bool
}

var errNetworkDown = errors.New("network down")

func (n *network) dial(ctx context.Context, network, host string) (net.Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return nil, errNetworkDown
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err == nil {
		n.conns = append(n.conns, c)
	}
	return c, err
}

func (n *network) cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = true
	for _, c := range n.conns {
		_ = c.Close()
	}
}
