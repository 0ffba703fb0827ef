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

	"github.com/grpc-idempotency/idempotency"
	"github.com/grpc-idempotency/idempotency/kafkaidempotency"
	"github.com/grpc-idempotency/idempotency/store/memorystore"
)

const (
	topic = "orders"
	group = "shipper"
	// waitLimit bounds every wait for an event; a test that reaches it
	// fails.
	waitLimit = 30 * time.Second
	lease     = 300 * time.Millisecond
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
	deadline := time.Now().Add(waitLimit)
	for {
		if got := k.committed(g, p); got >= want {
			return got
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("group %s: partition %d committed %d after %v, want %d", g, p, k.committed(g, p), waitLimit, want)
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
	ctx, cancel := context.WithCancel(context.WithoutCancel(k.t.Context()))
	done := make(chan error, 1)
	go func() {
		err := p.Run(ctx, k.clientOpts(g, more...)...)
		if ctx.Err() == nil {
			k.t.Errorf("Run returned before it was stopped: %v", err)
		}
		done <- err
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				k.t.Error(err)
			}
		})
	}
	k.t.Cleanup(stop)
	return stop
}

// newServer returns an idempotency server on a memory store of its own,
// closed at the end of the test, with a short lease.
func newServer(t *testing.T, opts ...idempotency.ServerOption) *idempotency.Server {
	return idempotency.NewServer(memStore(t), append([]idempotency.ServerOption{idempotency.WithLease(lease)}, opts...)...)
}

// memStore returns a memory store closed at the end of the test.
func memStore(t *testing.T) *memorystore.Store {
	mem := memorystore.New()
	t.Cleanup(func() { _ = mem.Close() })
	return mem
}

// results collects the Results of the processors it is given to.
type results chan kafkaidempotency.Result

func newResults() results { return make(results, 1000) }

func (r results) option() kafkaidempotency.Option {
	return kafkaidempotency.WithResults(func(res kafkaidempotency.Result) { r <- res })
}

// wait returns the next Result that match accepts, failing the test after
// waitLimit; the Results it skips are returned in seen.
func (r results) wait(t *testing.T, what string, match func(kafkaidempotency.Result) bool) (got kafkaidempotency.Result, seen []kafkaidempotency.Result) {
	t.Helper()
	limit := time.After(waitLimit)
	for {
		select {
		case res := <-r:
			if match(res) {
				return res, seen
			}
			seen = append(seen, res)
		case <-limit:
			t.Fatalf("no result %s after %v; saw %+v", what, waitLimit, seen)
		}
	}
}

// drain returns the Results received so far.
func (r results) drain() []kafkaidempotency.Result {
	var out []kafkaidempotency.Result
	for {
		select {
		case res := <-r:
			out = append(out, res)
		default:
			return out
		}
	}
}

// value returns the Result's record value: the tests' record id.
func value(r kafkaidempotency.Result) string { return string(r.Record.Value) }

// ledger is the side effect the tests own: how many times each record's
// work was done, in order.
type ledger struct {
	mu      sync.Mutex
	done    map[string]int
	order   []string
	written *sync.Cond // on mu, lazily made: a write happened
}

func (l *ledger) write(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = map[string]int{}
	}
	l.done[id]++
	l.order = append(l.order, id)
	if l.written != nil {
		l.written.Broadcast()
	}
}

// waitWrites waits until the ledger holds n writes, failing t after
// waitLimit.
func (l *ledger) waitWrites(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.written == nil {
		l.written = sync.NewCond(&l.mu)
	}
	timedOut := false
	timer := time.AfterFunc(waitLimit, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		timedOut = true
		l.written.Broadcast()
	})
	defer timer.Stop()
	for len(l.order) < n && !timedOut {
		l.written.Wait()
	}
	if len(l.order) < n {
		t.Fatalf("%d writes after %v, want %d", len(l.order), waitLimit, n)
	}
}

func (l *ledger) count(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done[id]
}

func (l *ledger) writes() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.order...)
}

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
