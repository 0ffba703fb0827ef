package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the sentinel of [StartSentinel]
// monitors.
const SentinelMaster = "mymaster"

// DefaultDownAfter is how long the master of [StartSentinel] must not
// answer before the sentinel deems it down, unless
// [SentinelConfig.DownAfter] says otherwise.
const DefaultDownAfter = 5 * time.Second

// failoverTimeout bounds the wait for a failover in [Sentinel.WaitFailover].
const failoverTimeout = 30 * time.Second

// Sentinel is a master, its replicas and one Redis Sentinel watching them,
// started by [StartSentinel] or [StartSentinelWith].
type Sentinel struct {
	tb testing.TB
	// Master is the monitored master as started. After a failover the
	// sentinel reports another master: see [Sentinel.MasterAddr].
	Master *Server
	// Replicas are the master's replicas, in the order started.
	Replicas []*Server
	proc     *process
}

// SentinelConfig configures [StartSentinelWith]. Its zero value is a master
// without replicas, deemed down after [DefaultDownAfter].
type SentinelConfig struct {
	// Replicas is the number of replicas of the master. Default 0.
	Replicas int
	// DownAfter is how long the master must not answer before the
	// sentinel deems it down and fails over to a replica. Default
	// [DefaultDownAfter].
	DownAfter time.Duration
	// ReplicaLink returns the address the i-th replica replicates the
	// master from, given the master's address: a fault proxy in front of
	// the master, for example. Default: the master's own address. The
	// sentinel reconfigures replicas directly after a failover.
	ReplicaLink func(i int, master string) string
}

// StartSentinel starts a standalone master and one redis-server --sentinel
// process monitoring it as [SentinelMaster] (quorum 1), waits until the
// sentinel reports the master healthy, and stops both in tb.Cleanup.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	return StartSentinelWith(tb, SentinelConfig{})
}

// StartSentinelWith is [StartSentinel] with replicas and settings from
// cfg: it starts the master, its replicas (each replicating through
// cfg.ReplicaLink, and waited for until its link is up) and the sentinel,
// and waits until the sentinel sees the master healthy with every replica.
func StartSentinelWith(tb testing.TB, cfg SentinelConfig) *Sentinel {
	tb.Helper()
	bin, _ := Require(tb)
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = DefaultDownAfter
	}
	master := StartServer(tb, noSyncDelay...)
	s := &Sentinel{tb: tb, Master: master}
	for i := range cfg.Replicas {
		link := master.Addr()
		if cfg.ReplicaLink != nil {
			link = cfg.ReplicaLink(i, link)
		}
		s.Replicas = append(s.Replicas, startReplica(tb, link))
	}
	waitOnline(tb, master, cfg.Replicas)
	s.proc = startProcess(tb, bin, false, func(dir string, port int) []string {
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\nsentinel resolve-hostnames no\n",
			port, dir, filepath.Join(dir, logFile))
		body += fmt.Sprintf("sentinel monitor %s %s 1\n", SentinelMaster, strings.Replace(master.Addr(), ":", " ", 1))
		body += fmt.Sprintf("sentinel down-after-milliseconds %s %d\n", SentinelMaster, cfg.DownAfter.Milliseconds())
		body += fmt.Sprintf("sentinel failover-timeout %s %d\n", SentinelMaster, failoverTimeout.Milliseconds())
		// The sentinel rewrites its config file, so it is written anew for
		// each start.
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		return []string{conf, "--sentinel"}
	})
	s.waitMaster(cfg.Replicas)
	return s
}

// noSyncDelay makes a master start the full sync of a new replica at once,
// instead of waiting 5 s (repl-diskless-sync-delay) for more replicas to
// sync with; replicas get it too, for when they are promoted.
var noSyncDelay = []string{"--repl-diskless-sync-delay", "0"}

// startReplica starts a server replicating from link and waits until its
// link to the master is up.
func startReplica(tb testing.TB, link string) *Server {
	tb.Helper()
	host, port, err := net.SplitHostPort(link)
	if err != nil {
		tb.Fatalf("redistest: replica link %q: %v", link, err)
	}
	r := StartServer(tb, append([]string{"--replicaof", host, port}, noSyncDelay...)...)
	deadline := time.Now().Add(readyTimeout)
	for {
		info, err := bulkCommand(r.Addr(), "INFO replication")
		if err == nil && strings.Contains(info, "master_link_status:up\r\n") {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: replica %s never linked to %s: %v\n%s", r.Addr(), link, err, info)
		}
		time.Sleep(pollInterval)
	}
}

// waitOnline waits until master counts n replicas online: only those
// count in a WAIT, and after a full sync a master puts a replica online
// only once it acknowledges the stream, up to a second later.
func waitOnline(tb testing.TB, master *Server, n int) {
	tb.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		info, err := bulkCommand(master.Addr(), "INFO replication")
		if err == nil && strings.Count(info, ",state=online,") == n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: the master does not have %d replicas online: %v\n%s", n, err, info)
		}
		time.Sleep(pollInterval)
	}
}

// waitMaster waits until the sentinel reports the master as ok, with its
// replicas.
func (s *Sentinel) waitMaster(replicas int) {
	want := fmt.Sprintf("name=%s,status=ok,address=%s,slaves=%d,", SentinelMaster, s.Master.Addr(), replicas)
	deadline := time.Now().Add(readyTimeout)
	for {
		info, err := bulkCommand(s.Addr(), "INFO sentinel")
		if err == nil && strings.Contains(info, want) {
			return
		}

		if time.Now().After(deadline) {
			s.tb.Fatalf("redistest: sentinel does not see its master and %d replicas: %v\n%s", replicas, err, info)
		}
		time.Sleep(pollInterval)
	}
}

// Addr returns the sentinel's address.
func (s *Sentinel) Addr() string { return s.proc.addr() }

// MasterAddr returns the address of the master the sentinel reports now.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	rdb := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	addr, err := rdb.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	if len(addr) != 2 {
		return "", fmt.Errorf("get-master-addr-by-name: %q", addr)
	}
	return net.JoinHostPort(addr[0], addr[1]), nil
}

// WaitFailover waits until the sentinel reports a master other than old
// and that master answers as a master, and returns it: one of
// [Sentinel.Replicas]. It fails the test after 30 s.
func (s *Sentinel) WaitFailover(ctx context.Context, old string) *Server {
	s.tb.Helper()
	deadline := time.Now().Add(failoverTimeout)
	for {
		addr, err := s.MasterAddr(ctx)
		if err == nil && addr != old {
			for _, r := range s.Replicas {
				if r.Addr() != addr {
					continue
				}
				info, err := bulkCommand(addr, "INFO replication")
				if err == nil && strings.Contains(info, "role:master\r\n") {
					return r
				}
			}
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redistest: no failover from %s within %v (sentinel reports %s, %v)", old, failoverTimeout, addr, err)
		}
		select {
		case <-ctx.Done():
			s.tb.Fatalf("redistest: waiting for a failover: %v", ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// Options returns fresh failover client options, to adjust before passing
// them to redis.NewFailoverClient; the caller closes such a client.
func (s *Sentinel) Options() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:    SentinelMaster,
		SentinelAddrs: []string{s.Addr()},
	}
}

// Client returns a new failover client that finds the master through the
// sentinel, closed in tb.Cleanup before the processes stop.
func (s *Sentinel) Client() *redis.Client {
	rdb := redis.NewFailoverClient(s.Options())
	s.tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
