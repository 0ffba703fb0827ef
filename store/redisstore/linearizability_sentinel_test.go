package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-idempotency/idempotency/internal/test/faultproxy"
	"github.com/grpc-idempotency/idempotency/store"
	"github.com/grpc-idempotency/idempotency/store/redisstore"
	"github.com/grpc-idempotency/idempotency/store/redisstore/redistest"
	"github.com/grpc-idempotency/idempotency/store/storetest"
)

// The shape of the Sentinel failover checks.
const (
	// sentinelLag is the latency added each way on each replication
	// link, so that the replicas trail the master as across a network,
	// and a failover has writes to lose.
	sentinelLag = 5 * time.Millisecond
	// sentinelClientLag is the latency added each way between the stores
	// and the servers: it paces the calls, so that the history of a run
	// stays a few thousand calls long.
	sentinelClientLag = 5 * time.Millisecond
	// sentinelWait is the WAIT timeout of WithMinReplicas.
	sentinelWait = 500 * time.Millisecond
	// sentinelKeys is how many keys the calls share: enough that claims
	// still win new keys after every failover (the calls of a Failover
	// check make no release).
	sentinelKeys = 1024
	// sentinelWon is how many won claims the clients make before each
	// failover and after the last.
	sentinelWon = 60
	// sentinelSwitch bounds the wait for a failover.
	sentinelSwitch = 30 * time.Second
)

// TestLinearizabilitySentinelFailover checks the promise of
// WithMinReplicas (the package documentation's "Replica
// acknowledgement"): a claim or a completion acknowledged by a replica
// survives a failover that promotes the most up-to-date replica, as
// Sentinel does with equal priorities. Two stores, each on a failover
// client of its own, call a Sentinel-managed master with two replicas
// (each replication link 5 ms each way, and each store's link to a
// server too, which paces the calls) with WithMinReplicas(1, 500ms),
// while the
// master fails over twice: its replication links stall (the stream in
// flight is lost) and its process stops (SIGSTOP: its connections hang,
// as a dead host's do), Sentinel promotes a replica (the test waits for
// +switch-master and the new master's role), the old master is killed
// and started again, empty, as a replica of the new one, and both
// replicas link to it through new lagging links. The clients make 60 won
// claims before each failover and after the last.
//
// The history is checked with storetest's Failover model: the calls are
// claims, completions, extensions and lookups (releases, abandons and
// purges are not waited for, and a failover may lose them); a failed
// claim or completion may be lost even after a lookup saw it; an
// acknowledged one never.
func TestLinearizabilitySentinelFailover(t *testing.T) {
	t.Parallel()
	rig := startSentinelRig(t, redisstore.WithMinReplicas(1, sentinelWait))
	until := make(chan struct{})
	failovers := 0
	var once sync.Once
	drive := func() {
		defer close(until)
		for range 2 {
			if !rig.waitWon(sentinelWon) || !rig.failover() {
				return
			}
			failovers++
		}
		rig.waitWon(sentinelWon)
	}
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{
		Stores: rig.stores, Keys: sentinelKeys, Failover: true, Until: until,
		CallTimeout: time.Second, FaultEvery: time.Millisecond,
		Faults: []func(){func() { once.Do(drive) }}, Heal: rig.heal,
	})
	t.Logf("%d failovers while the calls ran", failovers)
	if failovers != 2 {
		t.Errorf("%d failovers while the calls ran, want 2", failovers)
	}
}

// TestLinearizabilitySentinelFailoverCatchesLoss proves that the check
// of TestLinearizabilitySentinelFailover can fail, on every run: without
// WithMinReplicas, the replication links stall, a claim is acknowledged
// by the master alone, and the master fails over: the replica promoted
// never had the claim, and the history is not linearizable.
func TestLinearizabilitySentinelFailoverCatchesLoss(t *testing.T) {
	t.Parallel()
	rig := startSentinelRig(t)
	until := make(chan struct{})
	var once sync.Once
	drive := func() {
		defer close(until)
		if !rig.waitWon(sentinelWon) {
			return
		}
		rig.stall()
		// A claim made since is on the master alone.
		if !rig.waitLost() || !rig.failover() {
			return
		}
		rig.waitWon(sentinelWon)
	}
	storetest.RunLinearizability(t, storetest.LinearizabilityConfig{
		Stores: rig.stores, Keys: sentinelKeys, Failover: true, Until: until,
		CallTimeout: time.Second, FaultEvery: time.Millisecond,
		Faults: []func(){func() { once.Do(drive) }}, Heal: rig.heal,
		WantIllegal: true,
	})
}

// sentinelRig is a Sentinel-managed master with two replicas, each
// replicating through a lagging fault proxy, and two stores on failover
// clients. Its methods after startSentinelRig run on the goroutine that
// injects faults: they report with t.Errorf and return false.
type sentinelRig struct {
	t        *testing.T
	sentinel *redistest.Sentinel
	// servers are the master and the replicas, by address.
	servers map[string]*redistest.Server
	master  string
	links   []*faultproxy.Proxy // the replication links to the master
	// front are the proxies between the stores and each server, by the
	// server's address.
	frontMu sync.Mutex
	front   map[string]*faultproxy.Proxy
	stores  []store.Store
	took    []time.Duration // each failover, from the stall to the new master's role

	won     atomic.Int64  // claims won
	lost    atomic.Int64  // claims won that were made while the links stalled
	stalled atomic.Bool   // the links to the master stall
	note    chan struct{} // a claim was won
}

// startSentinelRig starts the master, its replicas and the sentinel, and
// two stores with opts.
func startSentinelRig(t *testing.T, opts ...redisstore.Option) *sentinelRig {
	t.Helper()
	r := &sentinelRig{t: t, servers: map[string]*redistest.Server{}, front: map[string]*faultproxy.Proxy{}, note: make(chan struct{}, 1)}
	r.sentinel = redistest.StartSentinelWith(t, redistest.SentinelConfig{
		Replicas:  2,
		DownAfter: time.Second,
		ReplicaLink: func(_ int, master string) string {
			p, err := r.link(master)
			if err != nil {
				t.Fatal(err)
			}
			return p.Addr()
		},
	})
	r.master = r.sentinel.Master.Addr()
	r.servers[r.master] = r.sentinel.Master
	for _, s := range r.sentinel.Replicas {
		r.servers[s.Addr()] = s
	}
	for range 2 {
		o := r.sentinel.Options()
		// No resends, as TestLinearizability says; a dial is bounded by
		// the call's context.
		o.MaxRetries, o.ContextTimeoutEnabled = -1, true
		o.Dialer = r.dial
		rdb := redis.NewFailoverClient(o)
		t.Cleanup(func() { _ = rdb.Close() })
		s := redisstore.New(rdb, opts...)
		if err := s.LoadScripts(t.Context()); err != nil {
			t.Fatal(err)
		}
		r.stores = append(r.stores, &wonClaims{Store: s, rig: r})
	}
	return r
}

// dial dials addr for a store: a server through its proxy, the sentinel
// directly.
func (r *sentinelRig) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if _, ok := r.servers[addr]; ok {
		r.frontMu.Lock()
		p, ok := r.front[addr]
		if !ok {
			var err error
			if p, err = faultproxy.New(addr); err != nil {
				r.frontMu.Unlock()
				return nil, err
			}
			r.t.Cleanup(func() { _ = p.Close() })
			p.SetLatency(sentinelClientLag)
			r.front[addr] = p
		}
		r.frontMu.Unlock()
		addr = p.Addr()
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// heal takes the latency off the stores' links, once the clients are
// done, so that the lookup of every key that ends the history is quick.
func (r *sentinelRig) heal() {
	r.frontMu.Lock()
	defer r.frontMu.Unlock()
	for _, p := range r.front {
		p.SetLatency(0)
	}
}

// link starts a replication link to master, lagging sentinelLag.
func (r *sentinelRig) link(master string) (*faultproxy.Proxy, error) {
	p, err := faultproxy.New(master)
	if err != nil {
		return nil, err
	}
	r.t.Cleanup(func() { _ = p.Close() })
	p.SetLatency(sentinelLag)
	r.links = append(r.links, p)
	return p, nil
}

// claimWon counts a won claim, made while the links stalled or not.
func (r *sentinelRig) claimWon(stalled bool) {
	r.won.Add(1)
	if stalled {
		r.lost.Add(1)
	}
	select {
	case r.note <- struct{}{}:
	default:
	}
}

// waitWon waits until the clients have won n more claims.
func (r *sentinelRig) waitWon(n int64) bool { return r.waitFor(&r.won, n) }

// waitLost waits until the clients have won a claim made after the links
// stalled.
func (r *sentinelRig) waitLost() bool { return r.waitFor(&r.lost, 1) }

// waitFor waits until count has grown by n.
func (r *sentinelRig) waitFor(count *atomic.Int64, n int64) bool {
	want := count.Load() + n
	deadline := time.After(sentinelSwitch)
	for count.Load() < want {
		select {
		case <-r.note:
		case <-deadline:
			r.t.Errorf("the clients won %d claims of the %d awaited in %v", n-(want-count.Load()), n, sentinelSwitch)
			return false
		case <-r.t.Context().Done():
			return false
		}
	}
	return true
}

// stall stops the master's replication stream: what it sends from now
// on never reaches the replicas.
func (r *sentinelRig) stall() {
	for _, p := range r.links {
		p.Stall()
	}
	r.stalled.Store(true)
}

// failover fails the master over: it stalls its replication links and
// stops its process, waits for the sentinel's +switch-master and for the
// new master to answer as one, then kills the old master, starts it
// again, empty, as a replica of the new one, links both replicas to the
// new master through lagging links, and waits until the new master has
// both online and the sentinel sees both as healthy replicas.
func (r *sentinelRig) failover() bool {
	ctx := r.t.Context()
	start := time.Now()
	sc := redis.NewSentinelClient(&redis.Options{Addr: r.sentinel.Addr()})
	defer sc.Close()
	sub := sc.Subscribe(ctx, "+switch-master")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		r.t.Errorf("subscribe to +switch-master: %v", err)
		return false
	}
	old := r.servers[r.master]
	pid, err := processID(ctx, r.master)
	if err != nil {
		r.t.Errorf("the master's process: %v", err)
		return false
	}
	r.stall()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		r.t.Errorf("stop the master: %v", err)
		return false
	}
	var next string
	select {
	case msg := <-sub.Channel():
		// "<name> <old ip> <old port> <new ip> <new port>"
		f := strings.Fields(msg.Payload)
		if len(f) != 5 || f[0] != redistest.SentinelMaster {
			r.t.Errorf("+switch-master %q", msg.Payload)
			return false
		}
		next = net.JoinHostPort(f[3], f[4])
	case <-time.After(sentinelSwitch):
		r.t.Errorf("no +switch-master within %v", sentinelSwitch)
		return false
	case <-ctx.Done():
		return false
	}
	if _, ok := r.servers[next]; !ok || next == r.master {
		r.t.Errorf("+switch-master to %s, from %s", next, r.master)
		return false
	}
	if !r.until(func() (bool, error) { return isMaster(ctx, next) }) {
		return false
	}
	r.took = append(r.took, time.Since(start))

	old.Stop()
	for _, p := range r.links {
		p.CutAll()
	}
	r.links, r.master = nil, next
	r.stalled.Store(false)
	old.Restart()
	var replicas []string
	for addr := range r.servers {
		if addr == next {
			continue
		}
		p, err := r.link(next)
		if err != nil {
			r.t.Error(err)
			return false
		}
		host, port, _ := net.SplitHostPort(p.Addr())
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		err = rdb.ReplicaOf(ctx, host, port).Err()
		_ = rdb.Close()
		if err != nil {
			r.t.Errorf("REPLICAOF on %s: %v", addr, err)
			return false
		}
		replicas = append(replicas, addr)
	}
	ok := r.until(func() (bool, error) { return online(ctx, next, replicas) }) &&
		r.until(func() (bool, error) { return r.healthy(ctx, replicas) })
	r.t.Logf("failover %d: +switch-master after %v, both replicas back after %v",
		len(r.took), r.took[len(r.took)-1].Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return ok
}

// until waits until cond holds, up to sentinelSwitch.
func (r *sentinelRig) until(cond func() (bool, error)) bool {
	deadline := time.Now().Add(sentinelSwitch)
	for {
		ok, err := cond()
		if ok {
			return true
		}
		if time.Now().After(deadline) {
			r.t.Errorf("not so after %v: %v", sentinelSwitch, err)
			return false
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-r.t.Context().Done():
			return false
		}
	}
}

// healthy reports whether the sentinel sees each of replicas as a
// replica of the master, and up: one it may promote. (What it last read
// of a replica's link and offset may be older: it reads them again, every
// second, once the master is down.)
func (r *sentinelRig) healthy(ctx context.Context, replicas []string) (bool, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: r.sentinel.Addr()})
	defer sc.Close()
	seen, err := sc.Replicas(ctx, redistest.SentinelMaster).Result()
	if err != nil {
		return false, err
	}
	ok := map[string]bool{}
	for _, s := range seen {
		if s["flags"] == "slave" && s["role-reported"] == "slave" {
			ok[net.JoinHostPort(s["ip"], s["port"])] = true
		}
	}
	for _, addr := range replicas {
		if !ok[addr] {
			return false, fmt.Errorf("the sentinel does not see %s as a healthy replica: %v", addr, seen)
		}
	}
	return true, nil
}

// processID returns the process id of the server at addr.
func processID(ctx context.Context, addr string) (int, error) {
	info, err := infoOf(ctx, addr, "server")
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`process_id:(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0, errors.New("INFO server without process_id")
	}
	return strconv.Atoi(m[1])
}

// isMaster reports whether the server at addr answers as a master.
func isMaster(ctx context.Context, addr string) (bool, error) {
	info, err := infoOf(ctx, addr, "replication")
	return err == nil && strings.Contains(info, "role:master\r\n"), err
}

// online reports whether the master at addr has each of replicas
// online.
func online(ctx context.Context, addr string, replicas []string) (bool, error) {
	info, err := infoOf(ctx, addr, "replication")
	if err != nil {
		return false, err
	}
	for _, replica := range replicas {
		_, port, _ := net.SplitHostPort(replica)
		if !strings.Contains(info, ",port="+port+",state=online,") {
			return false, fmt.Errorf("%s is not online:\n%s", replica, info)
		}
	}
	return true, nil
}

// infoOf returns a section of INFO of the server at addr.
func infoOf(ctx context.Context, addr, section string) (string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	return rdb.Info(ctx, section).Result()
}

// wonClaims is a store that tells its rig of each claim it won.
type wonClaims struct {
	*redisstore.Store
	rig *sentinelRig
}

// Claim implements store.Store.
func (s *wonClaims) Claim(ctx context.Context, key string, fingerprint []byte, lease time.Duration, opts store.ClaimOptions) (store.ClaimResult, error) {
	stalled := s.rig.stalled.Load()
	c, err := s.Store.Claim(ctx, key, fingerprint, lease, opts)
	if err == nil && c.Won() {
		s.rig.claimWon(stalled)
	}
	return c, err
}
