package redistest

import (
	"fmt"
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

// Sentinel is a master watched by one Redis Sentinel, started by
// [StartSentinel].
type Sentinel struct {
	tb testing.TB
	// Master is the monitored master.
	Master *Server
	proc   *process
}

// StartSentinel starts a standalone master and one redis-server --sentinel
// process monitoring it as [SentinelMaster] (quorum 1), waits until the
// sentinel reports the master healthy, and stops both in tb.Cleanup.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	bin, _ := Require(tb)
	master := StartServer(tb)
	proc := startProcess(tb, bin, false, func(dir string, port int) []string {
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel resolve-hostnames no\n"+
			"sentinel monitor %s %s 1\n"+
			"sentinel down-after-milliseconds %s 5000\n",
			port, dir, filepath.Join(dir, logFile),
			SentinelMaster, strings.Replace(master.Addr(), ":", " ", 1), SentinelMaster)
		// The sentinel rewrites its config file, so it is written anew for
		// each start.
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		return []string{conf, "--sentinel"}
	})
	s := &Sentinel{tb: tb, Master: master, proc: proc}
	s.waitMaster()
	return s
}

// waitMaster waits until the sentinel reports the master as ok.
func (s *Sentinel) waitMaster() {
	want := fmt.Sprintf("name=%s,status=ok,address=%s,", SentinelMaster, s.Master.Addr())
	deadline := time.Now().Add(readyTimeout)
	for {
		info, err := bulkCommand(s.Addr(), "INFO sentinel")
		if err == nil && strings.Contains(info, want) {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redistest: sentinel does not see its master: %v\n%s", err, info)
		}
		time.Sleep(pollInterval)
	}
}

// Addr returns the sentinel's address.
func (s *Sentinel) Addr() string { return s.proc.addr() }

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
